# Rota's container image: one static binary on scratch.
#
#   make image                     # docker build with the version, commit and date of the checkout
#   docker run -d -p 127.0.0.1:8080:8080 -v rota-data:/data -e ROTA_AUTH_TOKEN=$(openssl rand -hex 32) rota
#
# The server listens on 0.0.0.0:8080 inside the container and keeps its
# embedded store in the /data volume. Set ROTA_AUTH_TOKEN: a server that
# listens beyond loopback requires a credential (docs/deploy/README.md).

ARG GO_VERSION=1.26.8

# The official Go image (Debian: make and CA certificates included).
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The Makefile's values, passed by `make image` (the build context has no .git).
ARG VERSION=
ARG COMMIT=
ARG BUILD_DATE=
# The same command as `make build`: CGO_ENABLED=0, time zones embedded.
RUN make build BIN=/out/rota VERSION="${VERSION}" COMMIT="${COMMIT}" BUILD_DATE="${BUILD_DATE}" \
 && mkdir -p /out/data \
 && echo 'rota:x:65532:65532:rota:/data:/sbin/nologin' > /out/passwd \
 && echo 'rota:x:65532:' > /out/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/rota /usr/local/bin/rota
USER 65532:65532
ENV ROTA_LISTEN=0.0.0.0:8080 \
    ROTA_DATA=/data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/rota", "healthcheck", "--server", "http://127.0.0.1:8080", "--timeout", "4s"]
ENTRYPOINT ["/usr/local/bin/rota"]
CMD ["server"]
