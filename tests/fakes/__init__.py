"""In-memory stand-ins for backends: a MessageChannel pair and a scriptable MCP server."""

from __future__ import annotations

from tests.fakes.fake_server import (
    Answer,
    AnswerAfter,
    AskHost,
    CrashMidCall,
    FakeConnector,
    FakeMcpServer,
    Hang,
    MemoryMessageChannel,
    ProgressForever,
    Received,
    ToolBehaviour,
    memory_channel_pair,
)

__all__ = [
    "Answer",
    "AnswerAfter",
    "AskHost",
    "CrashMidCall",
    "FakeConnector",
    "FakeMcpServer",
    "Hang",
    "MemoryMessageChannel",
    "ProgressForever",
    "Received",
    "ToolBehaviour",
    "memory_channel_pair",
]
