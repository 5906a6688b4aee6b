package cel

import (
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/runtime"
)

// objectValue is a CEL map over a typed object that converts only what an expression reads:
// metadata comes from metaValue, every other key from one unstructured conversion of the
// whole object, made on first use.
type objectValue struct {
	obj  Object
	meta *metaValue
	full ref.Val
}

var (
	_ ref.Val       = (*objectValue)(nil)
	_ traits.Mapper = (*objectValue)(nil)
	_ ref.Val       = (*metaValue)(nil)
	_ traits.Mapper = (*metaValue)(nil)
)

func isNilPointer(obj any) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// unstructured returns the whole object as a CEL map, converting it once.
func (o *objectValue) unstructured() ref.Val {
	if o.full == nil {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o.obj)
		if err != nil {
			o.full = types.NewErr("convert %T to a CEL value: %v", o.obj, err)
		} else {
			o.full = types.DefaultTypeAdapter.NativeToValue(u)
		}
	}
	return o.full
}

func (o *objectValue) mapper() (traits.Mapper, ref.Val) {
	full := o.unstructured()
	m, ok := full.(traits.Mapper)
	if !ok {
		return nil, full
	}
	return m, nil
}

// Find implements traits.Mapper.
func (o *objectValue) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok && k == "metadata" {
		if o.meta == nil {
			o.meta = &metaValue{parent: o}
		}
		return o.meta, true
	}
	m, errVal := o.mapper()
	if m == nil {
		return errVal, true
	}
	return m.Find(key)
}

// Get implements traits.Indexer.
func (o *objectValue) Get(key ref.Val) ref.Val {
	if v, found := o.Find(key); found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// Contains implements traits.Container.
func (o *objectValue) Contains(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

// Iterator implements traits.Iterable.
func (o *objectValue) Iterator() traits.Iterator {
	m, errVal := o.mapper()
	if m == nil {
		return types.NewStringList(types.DefaultTypeAdapter, nil).Iterator()
	}
	_ = errVal
	return m.Iterator()
}

// Size implements traits.Sizer.
func (o *objectValue) Size() ref.Val {
	m, errVal := o.mapper()
	if m == nil {
		return errVal
	}
	return m.Size()
}

// ConvertToNative implements ref.Val.
func (o *objectValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return o.unstructured().ConvertToNative(typeDesc)
}

// ConvertToType implements ref.Val.
func (o *objectValue) ConvertToType(typeValue ref.Type) ref.Val {
	switch typeValue {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return o.unstructured().ConvertToType(typeValue)
}

// Equal implements ref.Val.
func (o *objectValue) Equal(other ref.Val) ref.Val {
	if ov, ok := other.(*objectValue); ok {
		other = ov.unstructured()
	}
	return o.unstructured().Equal(other)
}

// Type implements ref.Val.
func (o *objectValue) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (o *objectValue) Value() any { return o.unstructured().Value() }

// metaValue is object.metadata: name, namespace, labels and annotations straight from the
// typed object, everything else from the unstructured conversion.
type metaValue struct {
	parent              *objectValue
	labels, annotations ref.Val
	full                ref.Val
}

func (m *metaValue) unstructured() ref.Val {
	if m.full == nil {
		pm, errVal := m.parent.mapper()
		if pm == nil {
			m.full = errVal
		} else if v, found := pm.Find(types.String("metadata")); found {
			m.full = v
		} else {
			m.full = types.DefaultTypeAdapter.NativeToValue(map[string]any{})
		}
	}
	return m.full
}

// Find implements traits.Mapper.
func (m *metaValue) Find(key ref.Val) (ref.Val, bool) {
	obj := m.parent.obj
	if k, ok := key.(types.String); ok {
		switch k {
		case "labels":
			if m.labels == nil {
				m.labels = stringMap(obj.GetLabels())
			}
			return m.labels, true
		case "annotations":
			if m.annotations == nil {
				m.annotations = stringMap(obj.GetAnnotations())
			}
			return m.annotations, true
		case "name":
			if n := obj.GetName(); n != "" {
				return types.String(n), true
			}
		case "namespace":
			if n := obj.GetNamespace(); n != "" {
				return types.String(n), true
			}
		}
	}
	full, ok := m.unstructured().(traits.Mapper)
	if !ok {
		return m.unstructured(), true
	}
	return full.Find(key)
}

func stringMap(in map[string]string) ref.Val {
	if in == nil {
		in = map[string]string{}
	}
	return types.NewStringStringMap(types.DefaultTypeAdapter, in)
}

// Get implements traits.Indexer.
func (m *metaValue) Get(key ref.Val) ref.Val {
	if v, found := m.Find(key); found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// Contains implements traits.Container.
func (m *metaValue) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

// Iterator implements traits.Iterable.
func (m *metaValue) Iterator() traits.Iterator {
	if full, ok := m.unstructured().(traits.Mapper); ok {
		return full.Iterator()
	}
	return types.NewStringList(types.DefaultTypeAdapter, nil).Iterator()
}

// Size implements traits.Sizer.
func (m *metaValue) Size() ref.Val {
	if full, ok := m.unstructured().(traits.Mapper); ok {
		return full.Size()
	}
	return m.unstructured()
}

// ConvertToNative implements ref.Val.
func (m *metaValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return m.unstructured().ConvertToNative(typeDesc)
}

// ConvertToType implements ref.Val.
func (m *metaValue) ConvertToType(typeValue ref.Type) ref.Val {
	switch typeValue {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return m.unstructured().ConvertToType(typeValue)
}

// Equal implements ref.Val.
func (m *metaValue) Equal(other ref.Val) ref.Val {
	if om, ok := other.(*metaValue); ok {
		other = om.unstructured()
	}
	return m.unstructured().Equal(other)
}

// Type implements ref.Val.
func (m *metaValue) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (m *metaValue) Value() any { return m.unstructured().Value() }
