# Rota's container image: one static binary on scratch, nothing else.
#
#   make image                     # make build, then docker build of this file (no base image is pulled)
#   docker run -d -p 127.0.0.1:8080:8080 -v rota-data:/data -e ROTA_AUTH_TOKEN=$(openssl rand -hex 32) rota
#
# `make image` stages the build context in .image/: the static binary of
# `make build` (CGO_ENABLED=0, the time zone database embedded), the host's
# CA certificates (for the schedule HTTP executor's https targets), a passwd
# and group line for the non-root user, and an empty data directory. The
# image needs no base image and no network to build.
#
# The server listens on 0.0.0.0:8080 inside the container and keeps its
# embedded store in the /data volume. Set ROTA_AUTH_TOKEN: a server that
# listens beyond loopback requires a credential (docs/deploy/README.md).
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY group /etc/group
COPY --chown=65532:65532 data /data
COPY rota /usr/local/bin/rota
USER 65532:65532
ENV ROTA_LISTEN=0.0.0.0:8080 \
    ROTA_DATA=/data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/rota", "healthcheck", "--server", "http://127.0.0.1:8080", "--timeout", "4s"]
ENTRYPOINT ["/usr/local/bin/rota"]
CMD ["server"]
