"""Tool profiles: how one document becomes tool calls on a given kind of server.

The server's tool list (read at initialize) decides which contract applies: ``docling-rs``
(docling.rs's server: one ``convert`` call per format), ``docling-mcp`` (convert into the
server's cache, then export) or ``per-format`` (the design seed's eight tools).
:func:`select_profile` picks one for the formats a job wants, or raises E305.

Names are imported on first use (:mod:`pipeline.support.lazy`): the settings tree reads
``ProfileSettings`` in every process (``doclane stats`` too) without loading the profiles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.profiles.base import CallReporter as CallReporter
    from pipeline.profiles.base import Conversion as Conversion
    from pipeline.profiles.base import ConversionRequest as ConversionRequest
    from pipeline.profiles.base import KeptDocument as KeptDocument
    from pipeline.profiles.base import McpCallRecord as McpCallRecord
    from pipeline.profiles.base import Profile as Profile
    from pipeline.profiles.base import ToolCalls as ToolCalls
    from pipeline.profiles.base import ToolClient as ToolClient
    from pipeline.profiles.base import ignore_call as ignore_call
    from pipeline.profiles.docling_mcp import DoclingMcpProfile as DoclingMcpProfile
    from pipeline.profiles.docling_rs import DoclingRsProfile as DoclingRsProfile
    from pipeline.profiles.per_format import PerFormatProfile as PerFormatProfile
    from pipeline.profiles.selection import available_profiles as available_profiles
    from pipeline.profiles.selection import select_profile as select_profile
    from pipeline.profiles.settings import ProfileSettings as ProfileSettings

if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
