module github.com/okg-extensions/network-plugin-policy/hack/licenses

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/google/licensecheck v0.3.1
)
