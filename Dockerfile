# metaquorum's image: `docker build -t metaquorum:0.1.0 .` (k8s/ runs it as
# `metaquorum serve`, every flag from METAQUORUM_* variables).
# Build stage: the wheel of this package and of every dependency.
FROM python:3.11-slim-bookworm AS wheels
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Run stage: the wheels installed, nothing else; a non-root user, no shell tools
# needed (k8s mounts the data volume, the secrets and an emptyDir on /tmp, and
# keeps the root filesystem read-only).
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 metaquorum \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin metaquorum
COPY --from=wheels /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels metaquorum \
    && rm -rf /wheels
USER 10001:10001
WORKDIR /var/lib/metaquorum
EXPOSE 8080 9093
ENTRYPOINT ["metaquorum"]
CMD ["serve"]
