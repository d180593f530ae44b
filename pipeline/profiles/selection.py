"""Choosing the profile for a server, a job's wanted formats and its options (E305 when none
fits). A worker chooses for each try on the server it got; submission chooses the same way for
every configured server, to refuse at the door what none of them can do
(``pipeline.submission.door``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from errors import MissingCapability
from pipeline.profiles.base import Profile, refuse_options
from pipeline.profiles.docling_mcp import DoclingMcpProfile
from pipeline.profiles.docling_rs import DoclingRsProfile
from pipeline.profiles.per_format import PerFormatProfile
from pipeline.profiles.settings import ProfileSettings


def available_profiles(
    tool_names: Iterable[str],
    settings: ProfileSettings,
    to_worker_path: Callable[[str], str] | None = None,
) -> list[Profile]:
    """Every profile whose contract the server's tools satisfy, in order of preference."""
    names = frozenset(tool_names)
    found: list[Profile] = []
    if settings.profile in ("auto", "docling-rs") and DoclingRsProfile.fits(names):
        found.append(DoclingRsProfile(compact_tables=settings.compact_tables))
    if settings.profile in ("auto", "docling-mcp") and DoclingMcpProfile.fits(names):
        found.append(
            DoclingMcpProfile.for_tools(
                names,
                server_cache_dir=settings.server_cache_dir,
                to_worker_path=to_worker_path,
                max_saved_bytes=settings.max_saved_bytes,
            )
        )
    if settings.profile in ("auto", "per-format") and PerFormatProfile.fits(names):
        found.append(PerFormatProfile(names))
    return found


def select_profile(
    tool_names: Iterable[str],
    formats: Sequence[str],
    settings: ProfileSettings,
    to_worker_path: Callable[[str], str] | None = None,
    *,
    options: Collection[str] = (),
) -> Profile:
    """The first profile that fits the tools and can produce every wanted format; with
    ``options`` (the names of a job's conversion options), one that takes them too.

    The formats were parsed at submission (``pipeline.jobs.formats.Formats``): one no profile
    knows is simply one it cannot give.
    """
    names = frozenset(tool_names)
    candidates = available_profiles(names, settings, to_worker_path)
    reasons: list[str] = []
    for profile in candidates:
        missing = profile.missing_formats(formats)
        if not missing:
            if options and not profile.takes_options:
                refuse_options(profile.name, options)
            return profile
        reasons.append(f"{profile.name} cannot give {', '.join(missing)}")
    if not candidates:
        if settings.profile == "auto":
            message = "the server's tools fit no profile (docling-rs, docling-mcp, per-format)"
        else:
            message = f"the server's tools do not fit the {settings.profile} profile"
    else:
        message = "no profile gives every wanted format: " + "; ".join(reasons)
        if any(p.name == "docling-mcp" for p in candidates) and "json" in formats:
            message += " (Docling JSON needs DOCLANE_SERVER_CACHE_DIR)"
    raise MissingCapability(
        message,
        detail={
            "formats": list(formats),
            "profile_setting": settings.profile,
            "tools": sorted(names)[:50],
        },
    )
