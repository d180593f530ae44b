"""Making a job's source ready for the server, at the worker, at the time of the attempt.

The file may have changed or vanished since submission, so it is validated again (E1xx fails
the job without calling a server). A URL is fetched by the worker itself into a scratch folder
of this attempt (``inbox/job-<id>-<attempt>/``) unless the server fetches URLs
(``DOCLANE_URL_MODE=server``; an ``s3://`` object is always fetched by the worker); the
folder is removed when the attempt ends, and the reconciler
sweeps the ones a killed worker left behind.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from pipeline.jobs.model import Job, SourceKind, Stage
from pipeline.objects.address import is_object_address
from pipeline.processing.journal import AttemptJournal
from pipeline.sources.downloader import Downloader
from pipeline.sources.local import validate_file
from pipeline.sources.models import SourceInfo
from pipeline.sources.objects import ObjectSources
from pipeline.sources.pathmap import PathMap
from pipeline.sources.settings import SourceSettings
from pipeline.sources.urls import check_url

log = logging.getLogger("doclane.processor")


@dataclass(frozen=True, slots=True)
class PreparedSource:
    """A source checked again at the worker, as the server will be given it."""

    info: SourceInfo
    #: A folder of this attempt's download, removed when the attempt ends.
    scratch: Path | None = None
    #: The inbox as the server sees it, when the file is doclane's own there (an upload, a
    #: download): a server that cannot read it needs the inbox among its roots.
    inbox: str | None = None

    def discard(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def scratch_folder(inbox_dir: Path, job: Job) -> Path:
    """Where one attempt of ``job`` downloads its URL (the reconciler sweeps stale ones)."""
    return inbox_dir / f"job-{job.id}-{job.attempt}"


class SourcePreparer:
    """Validates files again and downloads URLs, for one worker process."""

    def __init__(
        self,
        settings: SourceSettings,
        path_map: PathMap,
        downloader: Downloader | None = None,
        objects: ObjectSources | None = None,
    ) -> None:
        self.settings = settings
        self.path_map = path_map
        self.downloader = downloader
        #: Built on the first ``s3://`` job, so a fleet without one needs no credentials.
        self.objects = objects

    def prepare(self, job: Job, journal: AttemptJournal) -> PreparedSource:
        """The source as the server must see it; E1xx when it is refused."""
        if job.source_kind is SourceKind.FILE:
            info = validate_file(job.source_uri, self.settings, path_map=self.path_map)
            if job.content_sha256 and info.sha256 != job.content_sha256:
                log.warning("the file changed since submission; converting its current content")
                journal.source(info)
            return PreparedSource(info, inbox=self._inbox_holding(info.path))
        url = job.fetch_uri
        if is_object_address(url):
            journal.stage(Stage.FETCHING)
            return self._fetch_object(job, url, journal)
        if self.settings.url_mode == "server":
            return PreparedSource(check_url(url, self.settings))
        journal.stage(Stage.FETCHING)
        scratch = scratch_folder(self.settings.inbox_dir, job)
        downloader = self.downloader or Downloader(self.settings, path_map=self.path_map)
        try:
            info = downloader.download(url, scratch)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            if downloader is not self.downloader:
                downloader.close()
        log.info("downloaded %s: %s bytes", job.source_uri, info.size_bytes)
        journal.source(info)
        return PreparedSource(info, scratch=scratch, inbox=self._inbox_holding(info.path))

    def _fetch_object(self, job: Job, uri: str, journal: AttemptJournal) -> PreparedSource:
        """An ``s3://`` object, into this attempt's scratch folder as a download would be."""
        scratch = scratch_folder(self.settings.inbox_dir, job)
        if self.objects is None:
            self.objects = ObjectSources(self.settings)
        try:
            info = self.objects.fetch(uri, scratch, self.path_map)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        log.info("fetched %s: %s bytes", job.source_uri, info.size_bytes)
        journal.source(info)
        return PreparedSource(info, scratch=scratch, inbox=self._inbox_holding(info.path))

    def _inbox_holding(self, path: Path | None) -> str | None:
        """The inbox (``DOCLANE_INBOX_DIR``) as the server sees it, if ``path`` lies in it."""
        inbox = self.settings.inbox_dir
        if path is None or not (path.is_relative_to(inbox) or path.is_relative_to(inbox.resolve())):
            return None
        return self.path_map.to_server_path(inbox)
