// Package policy is the validating admission webhook for NetworkPluginPolicy: it compiles
// every CEL expression with the NewExpressions environment, rejects invalid policies with
// field paths and returns warnings for legal but suspicious settings.
package policy
