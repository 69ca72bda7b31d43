FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 VAR_DIR=/app/var NUMBA_CACHE_DIR=/app/var/cache/numba \
    STATIC_ROOT=/app/static
WORKDIR /app

RUN apt-get update && apt-get install -y --no-install-recommends libpq5 && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 study

# Exact, hash-checked versions from the runtime lock (`make lock` regenerates it), then the project without deps.
COPY requirements/lock.txt requirements/lock.txt
RUN pip install --upgrade pip && pip install --require-hashes -r requirements/lock.txt
COPY pyproject.toml README.md ./
RUN pip install --no-deps .
COPY . .
RUN mkdir -p /app/var /app/static \
    && DJANGO_SECRET_KEY=build-only DJANGO_ALLOWED_HOSTS=localhost python manage.py collectstatic --noinput -v 0 \
    && chown -R study /app/var /app/static

USER study
EXPOSE 8000
CMD ["gunicorn", "--config", "gunicorn.conf.py", "studyapp.wsgi:application"]
