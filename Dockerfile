# Signoff: `signoff serve` (the Slack app, workers, scheduler, outbox dispatcher) by default;
# `signoff worker` or any other command by overriding CMD. See README "Deploying".

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent_runtime ./agent_runtime
COPY store ./store
COPY bot ./bot
COPY devkit ./devkit
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 signoff
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels /wheels/signoff-*.whl \
    && rm -rf /wheels
USER 10001
WORKDIR /home/signoff
ENV PYTHONUNBUFFERED=1 SIGNOFF_PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('SIGNOFF_PORT', '8080') + '/healthz', timeout=2)"]
ENTRYPOINT ["signoff"]
CMD ["serve"]
