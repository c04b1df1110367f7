# The lab server (compose.yaml): the ssdbench package with its lab extra. Its wheel build fetches uPlot from
# the npm registry at its pinned version and hash (webui/fetch_uplot.py). psycopg's binary wheel brings its libpq.
FROM python:3.11-slim
COPY webui /src/webui
RUN pip install --no-cache-dir '/src/webui[lab]' && rm -rf /src
# The server runs as a user of its own, which may write only the store (a new volume takes /store's owner).
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin lab \
    && mkdir /store && chown lab: /store && chmod 0750 /store
USER lab
# The schema is migrated at every start (it is idempotent), then the server runs, while the cards an upgrade
# made or emptied are filled from the store beside it, in committed batches (lab migrate --store). The proxy's
# X-Forwarded-For is trusted on its connections only: compose.yaml gives it its address, 172.30.77.2.
CMD ["sh", "-c", "ssdbench lab migrate && { ssdbench lab migrate --store /store & } && exec ssdbench lab serve --host 0.0.0.0 --port 8090 --store /store --behind-proxy 172.30.77.2"]
