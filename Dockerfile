# One image for every copytrack service of docker-compose.yml (worker, beat, crawler,
# admin, flower): the command picks the role. Configuration comes from COPYTRACK_*
# environment variables at run time; the image holds no secrets and no data.
#
# Two stages. The builder compiles copytrack's loops (Cython, a C compiler) into a wheel,
# and fails if one of them did not compile; the runtime stage installs that wheel and the
# locked dependencies (requirements/image.lock: every package pinned with its hashes, no
# embedded servers, no dev tools) and has no compiler.

FROM python:3.11-slim-bookworm AS builder

RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# The build tools the tests ran on (setuptools, Cython), by hash.
COPY requirements/build.lock requirements/
RUN pip install --require-hashes -r requirements/build.lock

COPY pyproject.toml README.md ./
COPY scripts/build-wheel.py scripts/
# The product's packages only: testbed/ (evaluation harness, local pirate sites) is not
# shipped, so `copytrack demo` and `copytrack eval` are for development machines.
COPY fingerprinter ./fingerprinter
COPY extractor ./extractor
COPY tracker ./tracker
COPY crawler ./crawler
COPY admin ./admin
COPY copytrack ./copytrack
RUN python scripts/build-wheel.py /wheels


FROM python:3.11-slim-bookworm

# WeasyPrint (the admin's PDF exports) needs Pango; Noto CJK gives Chinese evidence its
# glyphs in those PDFs. Campaigns that render pages run Debian's Chromium
# (crawler/rendering.py), never a browser Playwright downloads; it also takes the evidence
# bundles' screenshots. OpenSSL verifies time-stamp tokens (tracker/evidence/verification.py).
# Tesseract with its Chinese (simplified, traditional) and English data reads the images of
# campaigns with `ocr` (extractor/ocr.py).
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-noto-cjk chromium openssl \
        tesseract-ocr tesseract-ocr-chi-sim tesseract-ocr-chi-tra tesseract-ocr-eng \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COPYTRACK_DATA_DIR=/data

# Dependencies first, from the lock alone: a code change then reuses this layer. Flower
# (Celery monitoring) is a service of the compose file, locked in image.lock beside
# copytrack's dependencies (requirements/image.in).
COPY requirements/image.lock /tmp/image.lock
RUN pip install --require-hashes -r /tmp/image.lock && rm /tmp/image.lock

# copytrack's wheel, without dependencies (all installed above); then the image refuses to
# build if a compiled loop does not load here.
COPY --from=builder /wheels /tmp/wheels
RUN pip install --no-deps --no-index /tmp/wheels/copytrack-*.whl \
    && rm -rf /tmp/wheels \
    && python -c "import sys; from tracker.monitoring.loops import compiled_loops, fallback_problem; \
        sys.exit(fallback_problem(compiled_loops()))"

# An unprivileged user owning only /data (crawl logs, process records); a named volume
# mounted there takes this ownership.
RUN useradd --system --uid 10001 --no-create-home --home-dir /data copytrack \
    && mkdir /data && chown copytrack /data
USER copytrack
WORKDIR /data

EXPOSE 8000 5555
CMD ["copytrack", "worker"]
