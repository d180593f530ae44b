# docling.rs's MCP server (docling-rs-mcp 2.52.7) for compose.yaml's `docling-rs-mcp` service
# (profile `rs`). Build from the repository root:
#   docker build -f docker/docling-rs-mcp.Dockerfile -t doclane-docling-rs-mcp .
#
# It needs the internet AT BUILD TIME: pip fetches docling-rs-mcp (a Rust engine in a wheel, no
# torch), and `docling-rs-mcp --download-models` fetches its layout, table and OCR models, so that
# PDFs get layout analysis and scans get OCR with no download at run time. Built without them
# (no internet), the server still runs and reads PDFs from their text layer only, as on doclane's
# dev and CI machines, which cannot build this image; CI only checks the file (tests/deploy/).
# The version is scripts/lib.sh's (DOCLING_RS_MCP_VERSION), the one the e2e tests ran against.

FROM python:3.11.10-slim-bookworm AS server

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DOCLING_RS_CACHE_DIR=/opt/docling-rs-models

RUN python -m venv /opt/docling-rs \
 && /opt/docling-rs/bin/pip install docling-rs-mcp==2.52.7

# The PDF and image models into a fixed folder that the server reads (DOCLING_RS_CACHE_DIR).
RUN /opt/docling-rs/bin/docling-rs-mcp --download-models

# The same uid as the doclane image: both read the shared volume at /srv/doclane.
ARG DOCLANE_UID=10001
RUN groupadd --system --gid "${DOCLANE_UID}" doclane \
 && useradd --system --uid "${DOCLANE_UID}" --gid doclane --home-dir /srv/docling-rs --shell /usr/sbin/nologin doclane \
 && mkdir -p /srv/docling-rs /srv/doclane/inbox \
 && chown -R doclane:doclane /srv/docling-rs /srv/doclane

ENV PATH=/opt/docling-rs/bin:$PATH

WORKDIR /srv/docling-rs
USER doclane
EXPOSE 3001

# Streamable HTTP on all interfaces for the compose network: --allow-remote, with the bearer
# token in DOCLING_RS_MCP_TOKEN (without one it serves anyone who reaches it, and says so).
# It reads files only under --root: the shared folder.
ENTRYPOINT ["docling-rs-mcp"]
CMD ["--http", "--host", "0.0.0.0", "--port", "3001", "--allow-remote", "--root", "/srv/doclane"]
