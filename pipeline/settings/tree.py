"""The settings tree: every component's section, read from the environment once per process.

Each process reads it in one place, its composition root (the CLI's command, the worker's app,
the API's context, built by ``doclane api``), and hands each part its section; a part never
reads the environment itself. A section's variables keep the names they always had
(``DOCLANE_RETRY_MAX_TRIES``, ``DOCLING_MCP_ORIGIN``): the tree is only how they are read.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from pipeline.admin.settings import AdminSettings
from pipeline.jobs.settings import ReconcileSettings, SubmitSettings
from pipeline.mcp.settings import McpSettings
from pipeline.processing.settings import ProcessingSettings
from pipeline.profiles.settings import ProfileSettings
from pipeline.resilience.settings import ResilienceSettings
from pipeline.settings.access import AccessSettings
from pipeline.settings.api import ApiSettings
from pipeline.settings.workers import WorkerSettings
from pipeline.sources.settings import SourceSettings
from pipeline.store.settings import StoreSettings
from pipeline.support.logs import LogSettings
from pipeline.support.secrets import SecretSettings
from pipeline.support.settings import ENV_FILE, Section, environment_values, invalid_setting
from pipeline.webhooks.settings import WebhookSettings


class Settings(BaseSettings):
    """Every section of doclane's settings, one field each (a section's defaults, validated,
    are the default; the environment's values are merged into them when the tree is read)."""

    # No input in validation errors: the tree's errors are raised here, whatever the section's
    # own config says, and a malformed token list or database URL must not print its secrets.
    model_config = SettingsConfigDict(
        env_file=ENV_FILE, extra="forbid", frozen=True, hide_input_in_errors=True
    )

    access: AccessSettings = AccessSettings.model_validate({})
    admin: AdminSettings = AdminSettings.model_validate({})
    api: ApiSettings = ApiSettings.model_validate({})
    logs: LogSettings = LogSettings.model_validate({})
    mcp: McpSettings = McpSettings.model_validate({})
    processing: ProcessingSettings = ProcessingSettings.model_validate({})
    profiles: ProfileSettings = ProfileSettings.model_validate({})
    reconcile: ReconcileSettings = ReconcileSettings.model_validate({})
    resilience: ResilienceSettings = ResilienceSettings.model_validate({})
    secrets: SecretSettings = SecretSettings.model_validate({})
    sources: SourceSettings = SourceSettings.model_validate({})
    store: StoreSettings = StoreSettings.model_validate({})
    submit: SubmitSettings = SubmitSettings.model_validate({})
    webhooks: WebhookSettings = WebhookSettings.model_validate({})
    worker: WorkerSettings = WorkerSettings.model_validate({})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Keyword arguments win, section by section and field by field (pydantic-settings
        # merges the sources' dictionaries deeply); the environment gives the rest.
        return (init_settings, _SectionsSource(settings_cls))

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        """Each section's name in the tree and its class, in the tree's order."""
        found: dict[str, type[Section]] = {}
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            assert isinstance(annotation, type) and issubclass(annotation, Section)
            found[name] = annotation
        return found


class _SectionsSource(PydanticBaseSettingsSource):
    """Each section's variables by their own flat names, not ``<SECTION>__<FIELD>``."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads whole sections

    def __call__(self) -> dict[str, Any]:
        env_file = self.config.get("env_file")
        assert env_file is None or isinstance(env_file, str)
        assert issubclass(self.settings_cls, Settings)
        return {
            name: environment_values(section, env_file)
            for name, section in self.settings_cls.sections().items()
        }


def read_settings(**sections: Any) -> Settings:
    """The environment (and ``.env``) as the settings tree; a keyword names a section and gives
    it values that win over the environment's (``store={"database_url": url}``), or the whole
    section (``store=StoreSettings(...)``).

    A value the tree cannot take is one catalog error, E120 (:class:`errors.InvalidSetting`),
    naming each variable at fault and what it wants: the composition roots print it as any
    failure, and a worker or ``doclane api`` stops with it rather than with pydantic's trace."""
    try:
        return Settings(**sections)
    except (ValidationError, SettingsError) as exc:
        raise invalid_setting(exc, Settings.sections()) from None
