# doclane's one image: `doclane worker`, `doclane beat`, `doclane api` and `doclane db migrate`
# all run from it (compose.yaml picks the command). Build from the repository root:
#   docker build -f docker/doclane.Dockerfile --target app -t doclane .
# Target `flower` adds Celery's monitor to it (compose.yaml's flower service).
#
# Two stages so that the final image holds a virtual environment and nothing that built it:
# no pip cache, no compiler, no dev dependencies (pytest, ruff and mypy stay in .venv).

# A pinned tag (Python 3.11, the version CI runs), not `latest`: a rebuild gives the same base.
FROM python:3.11.10-slim-bookworm AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/doclane

# Dependencies first, pinned (docker/requirements.txt, written by
# scripts/pin_image_requirements.py from the versions CI tested): this layer is rebuilt only
# when the pins change, not on every code change.
COPY docker/requirements.txt /tmp/requirements.txt
RUN /opt/doclane/bin/pip install --requirement /tmp/requirements.txt

# The package itself, from the repository (not an editable install: the source is not kept).
COPY pyproject.toml README.md /src/
COPY errors /src/errors
COPY pipeline /src/pipeline
COPY workers /src/workers
COPY migrations /src/migrations
RUN /opt/doclane/bin/pip install --no-deps --constraint /tmp/requirements.txt /src


FROM python:3.11.10-slim-bookworm AS app

# The same uid as the docling server image (docker/docling-mcp.Dockerfile), so files one
# writes on the shared volume (uploads, downloads, the server's saved Docling JSON) the other
# can read.
ARG DOCLANE_UID=10001
RUN groupadd --system --gid "${DOCLANE_UID}" doclane \
 && useradd --system --uid "${DOCLANE_UID}" --gid doclane --home-dir /app --shell /usr/sbin/nologin doclane \
 && mkdir -p /srv/doclane/inbox /srv/doclane/server-cache \
 && chown -R doclane:doclane /srv/doclane

# The numbered SQL files `doclane db migrate` applies are in it: they ship with the package.
COPY --from=build /opt/doclane /opt/doclane

ENV PATH=/opt/doclane/bin:$PATH \
    PYTHONUNBUFFERED=1

WORKDIR /app
USER doclane

ENTRYPOINT ["doclane"]
CMD ["--help"]


# Flower, run with doclane's own Celery app (workers.monitor): with Celery's defaults its
# remote-control commands carry Redis bindings the workers cannot parse (they log "Control
# command error") and it would show no workers. Kept out of the `app` image: only this one
# service needs it.
FROM app AS flower
USER root
RUN /opt/doclane/bin/pip install --no-cache-dir flower==2.0.1
USER doclane
EXPOSE 5555
ENTRYPOINT ["celery", "--app", "workers.monitor", "flower"]
CMD ["--port=5555"]
