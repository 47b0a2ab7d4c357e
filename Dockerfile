# sluice gateway image: a static binary on a small base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# What `sluice version` prints: docker build --build-arg VERSION=$(git describe --always --dirty) .
# (.git stays out of the context, so Go's own VCS stamp is not there to read.)
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice .

FROM alpine:3.20
# No tzdata package: the binary carries the IANA zone database (time/tzdata) for
# calendar quotas' timezones.
# /var/lib/sluice: where a fleet gateway keeps its last good rules (docs/fleet.md).
RUN adduser -D -H -u 10001 sluice && mkdir -p /var/lib/sluice && chown sluice /var/lib/sluice
COPY --from=build /out/sluice /usr/local/bin/sluice
USER sluice
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["-config", "/etc/sluice/rules.yaml"]
