# The image the Helm chart runs: wayline with its NATS world and operator, and the examples.
# Your own image: the same, with your application package installed instead of examples/.
#   docker build -t wayline:0.1.0 .
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY runtime runtime
COPY operator operator
RUN pip install --no-cache-dir '.[nats,operator,metrics,otel]'
COPY examples examples
# the examples' fake payment provider keeps its file under .wayline/ in the working directory
RUN mkdir -p /app/.wayline && chown 65532:65532 /app/.wayline
ENV PYTHONUNBUFFERED=1 PYTHONPATH=/app
USER 65532:65532
ENTRYPOINT []
CMD ["wayline", "--help"]
