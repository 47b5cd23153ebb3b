# The image the Helm chart runs: wayline with its NATS world, operator and console (the
# console's pages ship inside the wheel), and the examples.
# Your own image: the same, with your application package installed instead of examples/.
#   docker build -t wayline:0.1.0 .
# BASE: any Debian-based Python 3.11+ image with pip first on PATH (tools/cluster/images.sh
# builds one from debootstrap where no registry is reachable).
ARG BASE=python:3.11-slim
FROM ${BASE}
WORKDIR /app
COPY pyproject.toml README.md ./
COPY runtime runtime
COPY operator operator
RUN pip install --no-cache-dir '.[nats,operator,metrics,otel,console]'
COPY examples examples
# A passwd entry for the uid the image runs as: without one, getpass.getuser() (kopf, pip, ...)
# raises KeyError. The examples' fake payment provider keeps its file under .wayline/ in the
# working directory (the chart mounts a writable emptyDir there: the root filesystem is
# read-only in the chart's pods).
RUN groupadd --gid 65532 wayline \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin wayline \
 && mkdir -p /app/.wayline && chown 65532:65532 /app/.wayline
ENV PYTHONUNBUFFERED=1 PYTHONPATH=/app PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT []
CMD ["wayline", "--help"]
