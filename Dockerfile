# metaquorum's image: the service alone, non-root, `metaquorum serve` as in
# k8s/ (every flag from METAQUORUM_* variables). `scripts/image.sh build` makes
# the wheelhouse and builds it (docs/kubernetes.md, "The image"); by hand:
#   pip wheel . -w wheelhouse    # CPython 3.11, Linux x86_64, as the base
#   docker build -t metaquorum:0.1.0 .
# BASE is any Debian-family image with python3 (3.11) and its venv module:
# the registry's python:3.11-slim-bookworm, or the one image.sh makes with
# debootstrap where no registry can be reached.
ARG BASE=python:3.11-slim-bookworm

# Build stage: a virtualenv from the wheelhouse alone (no index, no compiler,
# no network: the wheels were built before, docs/decisions.md 79), then the
# root filesystem: the interpreter, the stdlib, the venv and the libraries
# they load (scripts/image_rootfs.py).
FROM ${BASE} AS build
COPY wheelhouse/ /wheels/
COPY scripts/image_rootfs.py /image_rootfs.py
RUN python3 -m venv /opt/metaquorum \
    && /opt/metaquorum/bin/pip install --no-cache-dir --no-index --find-links /wheels metaquorum \
    && /opt/metaquorum/bin/pip uninstall --yes --quiet pip setuptools
RUN python3 /image_rootfs.py /opt/metaquorum /rootfs --uid 10001 --gid 10001 \
    && mkdir /data

# Run stage: that tree alone, one layer; no shell (kubectl exec runs
# `metaquorum status`, the preStop hook `metaquorum transfer-leadership`).
# The pod mounts the data volume, the secrets and an emptyDir on /tmp, and
# keeps the root filesystem read-only.
FROM scratch
COPY --from=build /rootfs/ /
COPY --from=build --chown=10001:10001 /data/ /var/lib/metaquorum/
ENV PATH=/opt/metaquorum/bin:/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/metaquorum
EXPOSE 8080 9093
ENTRYPOINT ["metaquorum"]
CMD ["serve"]
