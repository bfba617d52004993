"""One JSON-RPC peer over one message channel: ids, the pending table, cancellation and progress."""
