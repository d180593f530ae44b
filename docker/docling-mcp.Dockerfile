# The Docling MCP server (docling-mcp 3.3.0) for compose.yaml's `docling-mcp` service.
# Build from the repository root:
#   docker build -f docker/docling-mcp.Dockerfile -t doclane-docling-mcp .
#
# It needs the internet AT BUILD TIME: pip fetches docling-mcp and CPU-only torch, and
# `docling-tools models download` fetches Docling's layout, table and OCR models from
# HuggingFace, so that PDFs and images convert in the deployment without any download at run
# time (HF_HUB_OFFLINE=1 below makes sure none is attempted). doclane's dev and CI machines have
# no internet access and cannot build this image; CI only checks the file (tests/deploy/).
#
# The recipe is scripts/lib.sh's (DOCLING_MCP_RECIPE), with one difference: torch and
# torchvision come from PyTorch's CPU index. PyPI's torchvision 0.28.0 is a CUDA build whose
# `import torchvision` fails beside CPU torch (docling-mcp-facts.md section 1); the dev
# machines never import it (no PDF there), but a PDF conversion does.

FROM python:3.11.10-slim-bookworm AS server

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/docling
RUN /opt/docling/bin/pip install \
      --extra-index-url https://download.pytorch.org/whl/cpu \
      torch==2.13.0+cpu torchvision==0.28.0+cpu 'docling-mcp[local]==3.3.0'

# Docling's default model set (layout, table structure, code/formula, picture classifier,
# RapidOCR) into a fixed folder that DOCLING_ARTIFACTS_PATH points the converter at.
RUN /opt/docling/bin/docling-tools models download --output-dir /opt/docling-models

# The same uid as the doclane image: both write and read the shared volume at /srv/doclane.
ARG DOCLANE_UID=10001
RUN groupadd --system --gid "${DOCLANE_UID}" doclane \
 && useradd --system --uid "${DOCLANE_UID}" --gid doclane --home-dir /srv/docling --shell /usr/sbin/nologin doclane \
 && mkdir -p /srv/docling /srv/doclane/inbox /srv/doclane/server-cache \
 && chown -R doclane:doclane /srv/docling /srv/doclane

COPY docker/docling-mcp-healthcheck.py /opt/docling-mcp-healthcheck.py

ENV PATH=/opt/docling/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DOCLING_ARTIFACTS_PATH=/opt/docling-models \
    HF_HUB_OFFLINE=1 \
    DOCLING_MCP_CONVERSION_MODE=local \
    CACHE_DIR=/srv/doclane/server-cache

# docling-mcp reads a .env in its working directory: an empty folder of its own, so nothing
# of doclane's is read by accident.
WORKDIR /srv/docling
USER doclane
EXPOSE 8000

# 0.0.0.0 so other containers reach it. That turns OFF docling-mcp's DNS-rebinding protection
# (foreign Host and Origin headers are accepted): never publish this port outside the compose
# network or a private one.
ENTRYPOINT ["docling-mcp-server"]
CMD ["--transport", "streamable-http", "--host", "0.0.0.0", "--port", "8000"]


# The stdio topology (compose.yaml's `worker-stdio`, profile `stdio`): a doclane worker with
# docling-mcp beside it, each worker process starting `docling-mcp-server --transport stdio`
# as its own child. WAITING FOR ISSUE 13: doclane's client has no stdio transport yet and does
# not read DOCLING_MCP_COMMAND; this stage only prepares the image.
FROM server AS worker-stdio

USER root
COPY docker/requirements.txt /tmp/requirements.txt
COPY pyproject.toml README.md /src/
COPY errors /src/errors
COPY pipeline /src/pipeline
COPY workers /src/workers
COPY migrations /src/migrations
RUN python -m venv /opt/doclane \
 && /opt/doclane/bin/pip install --requirement /tmp/requirements.txt \
 && /opt/doclane/bin/pip install --no-deps /src \
 && rm -rf /src /tmp/requirements.txt

# docling-mcp-server stays on PATH (from /opt/docling); doclane comes first.
ENV PATH=/opt/doclane/bin:/opt/docling/bin:$PATH
WORKDIR /app
USER doclane
ENTRYPOINT ["doclane"]
CMD ["worker"]
