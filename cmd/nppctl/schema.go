package main

import (
	"context"
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemacel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/crds"
)

// crdSchema validates NetworkPluginPolicy objects as the apiserver does on CREATE, from the
// CRD that `make manifests` generates (embedded by package crds): unknown fields (kubectl's
// default strict field validation), defaults, metadata, the OpenAPI schema,
// x-kubernetes-list-type invariants and the x-kubernetes-validations CEL rules, with the
// apiserver's per-call and per-object CEL cost limits. It uses the apiserver's own libraries
// (k8s.io/apiextensions-apiserver), in the order of its customresource strategy.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *schemacel.Validator
}

// newCRDSchema builds the validator for version v1alpha1 of the embedded CRD. Errors mean
// the embedded CRD is broken, a build defect.
func newCRDSchema() (*crdSchema, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crds.NetworkPluginPolicy, crd); err != nil {
		return nil, fmt.Errorf("decode the embedded NetworkPluginPolicy CRD: %w", err)
	}
	var v1Schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == v1alpha1.GroupVersion.Version && v.Schema != nil {
			v1Schema = v.Schema.OpenAPIV3Schema
		}
	}
	if v1Schema == nil {
		return nil, fmt.Errorf("the embedded NetworkPluginPolicy CRD has no schema for version %s", v1alpha1.GroupVersion.Version)
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("convert the CRD schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the CRD schema is not structural: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("build the CRD schema validator: %w", err)
	}
	return &crdSchema{
		structural: structural,
		validator:  validator,
		cel:        schemacel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// validate checks obj (a NetworkPluginPolicy; it is pruned and defaulted in place) and
// returns the problems with their field paths, the apiserver's messages. Unknown fields are
// reported as kubectl's strict field validation reports them, then dropped.
func (s *crdSchema) validate(ctx context.Context, obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	for _, path := range structuralpruning.PruneWithOptions(obj.Object, s.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		errs = append(errs, field.Invalid(field.NewPath(path), nil, "unknown field"))
	}
	structuraldefaulting.Default(obj.Object, s.structural)
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaAccessor(obj, true,
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, s.validator)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, obj.Object)...)
	// As the apiserver's customresource strategy (hasBlockingErr): CEL rules run only when no
	// error makes their input unreliable.
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		}
	}
	celErrs, _ := s.cel.Validate(ctx, nil, s.structural, obj.Object, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// toPolicy converts a validated object to the API type.
func toPolicy(obj *unstructured.Unstructured) (*v1alpha1.NetworkPluginPolicy, error) {
	p := &v1alpha1.NetworkPluginPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, p); err != nil {
		return nil, fmt.Errorf("decode NetworkPluginPolicy: %w", err)
	}
	return p, nil
}
