"""Tool profiles: how one document becomes tool calls on a given kind of server.

The server's tool list (read at initialize) decides which contract applies: ``docling-rs``
(docling.rs's server: one ``convert`` call per format), ``docling-mcp`` (convert into the
server's cache, then export) or ``per-format`` (the design seed's eight tools).
:func:`select_profile` picks one for the formats a job wants, or raises E305.
"""

from __future__ import annotations

from pipeline.profiles.base import (
    CallReporter,
    Conversion,
    ConversionRequest,
    KeptDocument,
    McpCallRecord,
    Profile,
    ToolCalls,
    ToolClient,
    ignore_call,
)
from pipeline.profiles.docling_mcp import DoclingMcpProfile
from pipeline.profiles.docling_rs import DoclingRsProfile
from pipeline.profiles.per_format import PerFormatProfile
from pipeline.profiles.selection import available_profiles, select_profile
from pipeline.profiles.settings import ProfileSettings

__all__ = [
    "CallReporter",
    "Conversion",
    "ConversionRequest",
    "DoclingMcpProfile",
    "DoclingRsProfile",
    "KeptDocument",
    "McpCallRecord",
    "PerFormatProfile",
    "Profile",
    "ProfileSettings",
    "ToolCalls",
    "ToolClient",
    "available_profiles",
    "ignore_call",
    "select_profile",
]
