"""The merged, namespaced view of every backend's lists, and its pages (sans-IO)."""
