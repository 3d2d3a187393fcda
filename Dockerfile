# Memora: one container runs the Telegram bot; data lives in the /data volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PTB_TIMEDELTA=1 \
    MEMORA_STORAGE__DATA_DIR=/data

RUN useradd --create-home --uid 10001 memora
WORKDIR /app

# Optional extras, e.g. --build-arg EXTRAS=postgres,webhooks (see deploy/).
ARG EXTRAS=""
# Dependencies first (cached until pyproject.toml changes), then the source.
COPY pyproject.toml README.md ./
RUN mkdir -p memora bot && touch memora/__init__.py bot/__init__.py \
    && pip install ".${EXTRAS:+[$EXTRAS]}" && pip uninstall -y memora
COPY memora ./memora
COPY bot ./bot
RUN pip install --no-deps .

RUN mkdir -p /data && chown memora:memora /data
VOLUME ["/data"]
USER memora

# Configure with environment variables (TELEGRAM_BOT_TOKEN, OPENAI_API_KEY, MEMORA_*)
# or mount a config file and set MEMORA_CONFIG=/config/config.toml.
ENTRYPOINT ["memora"]
CMD ["run"]
