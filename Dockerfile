# syntax=docker/dockerfile:1
#
# The winadmit image: one binary on distroless (glibc, no shell), running as
# the non-root user 65532 (the Deployment's runAsUser).
#   docker build -t ghcr.io/winadmit/winadmit:0.1.0 .
#   docker run --rm -v "$PWD:/work:ro" ghcr.io/winadmit/winadmit:0.1.0 lint /work/k8s

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Strip symbols: the binary is most of the image.
ENV CARGO_PROFILE_DIST_STRIP=symbols
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin winadmit \
    && install -m 0755 target/dist/winadmit /winadmit

# glibc + libgcc, CA certificates, no shell, no package manager; the
# :nonroot tag runs as 65532:65532. Same Debian release as the builder.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="winadmit" \
      org.opencontainers.image.description="Admission webhook and policy validator for Windows nodes in Kubernetes"
COPY --from=build /winadmit /usr/local/bin/winadmit
USER 65532:65532
# 8443: HTTPS webhook (/validate, /mutate, /healthz, /readyz, /metrics);
# 9090: plain-HTTP /metrics when started with --metrics-listen.
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/winadmit"]
CMD ["serve"]
