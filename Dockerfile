# Image of the manager for config/default (image name "manager", set with
# `cd config/manager && kustomize edit set image manager=<registry>/network-plugin-policy:<tag>`).
#   docker build -t network-plugin-policy:latest .
# Not built by CI: the development machines have no container engine.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
COPY --from=build /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
