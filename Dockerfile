# One image for every copytrack service of docker-compose.yml (worker, beat, crawler,
# admin, flower): the command picks the role. Configuration comes from COPYTRACK_*
# environment variables at run time; the image holds no secrets and no data.
FROM python:3.11-slim-bookworm

# WeasyPrint (the admin's PDF exports) needs Pango; Noto CJK gives Chinese evidence its
# glyphs in those PDFs. Campaigns that render pages run Debian's Chromium
# (crawler/rendering.py), never a browser Playwright downloads.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-noto-cjk chromium \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COPYTRACK_DATA_DIR=/data

WORKDIR /app

# Dependencies first, read from pyproject.toml alone: a code change then reuses this layer.
# Flower (Celery monitoring) is a service of the compose file, not a dependency of the
# package.
COPY pyproject.toml ./
RUN python -c "import tomllib; \
        project = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
        print('\n'.join(project['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt "flower==2.0.1" \
    && rm /tmp/requirements.txt

COPY README.md ./
# The product's packages only: testbed/ (evaluation harness, local pirate sites) is not
# shipped, so `copytrack demo` and `copytrack eval` are for development machines.
COPY fingerprinter ./fingerprinter
COPY extractor ./extractor
COPY tracker ./tracker
COPY crawler ./crawler
COPY admin ./admin
COPY copytrack ./copytrack
# Editable: the code runs from /app, where the admin's templates and static files are
# (package-data lists only the fingerprinter's tables). Compiled now, since the
# unprivileged user below cannot write __pycache__ at run time.
RUN pip install --no-deps -e . \
    && python -m compileall -q fingerprinter extractor tracker crawler admin copytrack

# An unprivileged user owning only /data (crawl logs, process records); a named volume
# mounted there takes this ownership.
RUN useradd --system --uid 10001 --no-create-home --home-dir /data copytrack \
    && mkdir /data && chown copytrack /data
USER copytrack

EXPOSE 8000 5555
CMD ["copytrack", "worker"]
