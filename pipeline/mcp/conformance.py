"""The MCP conformance suite's client scenarios: ``python -m pipeline.mcp.conformance URL``.

The suite (npm ``@modelcontextprotocol/conformance``) starts a scenario server, runs this module
with the server's URL as the last argument and the scenario's name in
``MCP_CONFORMANCE_SCENARIO``, and judges what the client did on the wire. The URL is used
exactly as given (some scenario servers serve MCP at the root path). Scenarios:

* ``initialize``: the handshake only. Its server declares no capabilities at all, so this
  scenario, and only this one, accepts a server without ``tools``.
* ``tools_call``: initialize, list the tools, call the one listed (``add_numbers``).
* ``sse-retry``: the same; the server closes the call's SSE stream after a priming event with
  ``retry: 500``, and judges that the client resumes with ``GET`` + ``Last-Event-ID`` after that
  delay, neither early nor late. Nothing special is done here: it is the client's own path.
* ``auth/client-credentials-basic`` and ``-jwt``: the same call, to a server that answers 401
  until the client brings a token. The suite passes the client's identity in
  ``MCP_CONFORMANCE_CONTEXT`` (JSON: ``client_id`` and ``client_secret``, or
  ``private_key_pem``); :func:`context_settings` maps it onto the settings an operator would
  set (``DOCLING_MCP_AUTH=oauth-client-credentials``, ``DOCLING_MCP_CLIENT_ID``, ``..._SECRET``
  or ``..._KEY_FILE``: the PEM is written to a private temporary file), so the scenario runs
  doclane's own OAuth code, discovery included.

Exit status: 0 when the scenario's client behaviour completed, 1 on a catalog error (printed as
JSON on stderr), 2 for a scenario this adapter does not know.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from errors import PipelineError
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import OAUTH, McpSettings

logger = logging.getLogger("doclane.mcp.conformance")

Scenario = Callable[[str, McpSettings], None]


def run_initialize(url: str, settings: McpSettings) -> None:
    with McpClient(url, settings=settings, require_tools=False) as client:
        server = client.initialize()
        logger.info("initialized: %s protocol %s", server.name, server.protocol_version)


def run_listed_tool(url: str, settings: McpSettings) -> None:
    """Initialize, list the tools and call the first with arguments its schema accepts."""
    with McpClient(url, settings=settings) as client:
        client.initialize()
        tools = client.tools()
        if not tools:
            raise SystemExit("the scenario server lists no tools")
        tool = tools[0]
        arguments = example_arguments(tool.input_schema)
        result = client.call_tool(tool.name, arguments)
        logger.info("%s%s -> %s", tool.name, arguments, result.text or result.structured)
        if result.is_error:
            raise SystemExit(f"{tool.name} reported an error: {result.text}")


def run_every_tool(url: str, settings: McpSettings) -> None:
    """Initialize, list the tools and call each one (a tool error is logged, not fatal).

    The harness answers what the server asks mid-call (the multi-round-trip scenarios ask for
    an elicitation) by accepting with each requested boolean true: a test policy, not doclane's.
    """
    with McpClient(url, settings=settings, on_input_request=accept_input) as client:
        client.initialize()
        for tool in client.tools():
            arguments = example_arguments(tool.input_schema, every=_has_header_params(tool))
            result = client.call_tool(tool.name, arguments)
            logger.info("%s -> %s", tool.name, "error" if result.is_error else "ok")


def run_list_only(url: str, settings: McpSettings) -> None:
    """Initialize and list the tools: the scenario judges what the client did with them."""
    with McpClient(url, settings=settings) as client:
        client.initialize()
        logger.info("tools: %s", [tool.name for tool in client.tools()])


def run_schema_echo(url: str, settings: McpSettings) -> None:
    """Call the echo tool with another tool's inputSchema, exactly as the client kept it."""
    with McpClient(url, settings=settings) as client:
        client.initialize()
        tools = client.tools()
        echo = next(t for t in tools if "schema" in (t.input_schema.get("properties") or {}))
        for tool in tools:
            if tool is not echo:
                client.call_tool(echo.name, {"schema": dict(tool.input_schema)})


def _has_header_params(tool: Any) -> bool:
    """A tool that mirrors arguments into headers gets a value for every property, chosen by
    its description, so the values that need Base64 are sent too."""
    properties = tool.input_schema.get("properties") or {}
    return any(isinstance(p, Mapping) and "x-mcp-header" in p for p in properties.values())


#: Description words -> a value that needs what they describe (header scenarios).
_DESCRIBED_VALUES = (
    ("null", None),
    ("control char", "ctl\x07val"),
    ("carriage return", "line\r\nbreak"),
    ("leading tab", "\tindented"),
    ("leading and trailing", "  padded  "),
    ("leading", " leading"),
    ("trailing", "trailing "),
    ("internal spaces", "two words"),
    ("non-ascii", "Zürich"),
    ("unicode", "日本"),
)


def accept_input(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if method == "elicitation/create":
        schema = params.get("requestedSchema") or {}
        return {"action": "accept", "content": example_arguments(schema, every=True)}
    raise SystemExit(f"the harness does not answer {method}")


SCENARIOS: dict[str, Scenario] = {
    "initialize": run_initialize,
    "tools_call": run_listed_tool,
    "sse-retry": run_listed_tool,
    "request-metadata": run_initialize,
    "sep-2322-client-request-state": run_every_tool,
    "http-standard-headers": run_every_tool,
    "http-custom-headers": run_every_tool,
    "http-invalid-tool-headers": run_every_tool,
    "json-schema-ref-no-deref": run_list_only,
    "json-schema-2020-12-preservation": run_schema_echo,
    "auth/client-credentials-basic": run_listed_tool,
    "auth/client-credentials-jwt": run_listed_tool,
}


def context_settings(context: Mapping[str, Any], key_dir: Path) -> dict[str, Any]:
    """Settings (field names) for the identity a scenario's context hands the client."""
    if "client_id" not in context:
        return {}
    overrides: dict[str, Any] = {"auth": OAUTH, "client_id": context["client_id"]}
    if context.get("private_key_pem"):
        key_file = key_dir / "client-key.pem"
        key_file.touch(mode=0o600)
        key_file.write_text(str(context["private_key_pem"]))
        overrides["client_key_file"] = key_file
    elif context.get("client_secret"):
        overrides["client_secret"] = str(context["client_secret"])
    return overrides


def example_arguments(schema: Mapping[str, Any], *, every: bool = False) -> dict[str, Any]:
    """Values for a schema's required (or ``every``) properties: defaults, constants, or one
    of each type."""
    properties = schema.get("properties") or {}
    required = list(properties) if every else schema.get("required") or []
    arguments: dict[str, Any] = {}
    for number, name in enumerate(required, start=1):
        spec = properties.get(name) or {}
        value = _example_value(spec, number)
        if value is not None or spec.get("type") == "null":
            arguments[name] = value  # "will be null": omitted, as a null header is
    return arguments


def _example_value(spec: Mapping[str, Any], number: int) -> Any:
    if "default" in spec:
        return spec["default"]
    description = str(spec.get("description", "")).lower()
    if spec.get("type") in ("string", "boolean", "integer") and "x-mcp-header" in spec:
        for words, value in _DESCRIBED_VALUES:
            if words in description and (value is None or spec.get("type") == "string"):
                return value
    if "const" in spec:
        return spec["const"]
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    examples: dict[str, Any] = {
        "integer": number,
        "number": number,
        "boolean": True,
        "array": [],
        "object": example_arguments(spec),
        "null": None,
    }
    return examples.get(str(kind), f"value-{number}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    if not args:
        print("usage: python -m pipeline.mcp.conformance <server-url>", file=sys.stderr)
        return 2
    url = args[-1]
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    scenario = SCENARIOS.get(name)
    if scenario is None:
        known = ", ".join(sorted(SCENARIOS))
        print(f"unsupported scenario {name!r}; this adapter runs {known}", file=sys.stderr)
        return 2
    # The suite names the revision it runs (--spec-version); doclane's own default is ``auto``.
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="doclane-conformance-") as key_dir:
        overrides = context_settings(context, Path(key_dir))
        if version:
            overrides["protocol_version"] = version
        try:
            scenario(
                url,
                McpSettings.model_validate(
                    {**McpSettings.from_environment().model_dump(), **overrides}
                ),
            )
        except PipelineError as exc:
            print(json.dumps({"scenario": name, "error": exc.to_dict()}), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
