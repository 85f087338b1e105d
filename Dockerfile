# Image for the Sluicegate components in docker-compose.yml (one image, one command each).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY sluicegate sluicegate
COPY schemas schemas
COPY streams streams
COPY consumers consumers
COPY projections projections
RUN pip install --no-cache-dir . && mkdir -p /var/lib/sluicegate/state
USER nobody
CMD ["sluicegate", "serve"]
