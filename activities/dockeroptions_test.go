package activities_test

import (
	"reflect"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// Every field of the Docker tier's options has a field of the same name in the wire spec,
// and DockerOptions copies it: an option added on one side only fails here.
func TestDockerOptionsCopiesEveryField(t *testing.T) {
	t.Parallel()
	var spec api.SandboxSpec
	sv := reflect.ValueOf(&spec).Elem()
	ot := reflect.TypeFor[docker.Options]()
	for i := range ot.NumField() {
		name := ot.Field(i).Name
		f := sv.FieldByName(name)
		if !f.IsValid() {
			t.Errorf("docker.Options.%s has no field of that name in api.SandboxSpec", name)
			continue
		}
		setNonZero(t, f, name)
	}
	got := reflect.ValueOf(activities.DockerOptions(spec))
	for i := range ot.NumField() {
		name := ot.Field(i).Name
		if f := sv.FieldByName(name); f.IsValid() && !reflect.DeepEqual(got.Field(i).Interface(), f.Interface()) {
			t.Errorf("DockerOptions does not copy %s: got %v, spec has %v", name, got.Field(i).Interface(), f.Interface())
		}
	}
}

func setNonZero(t *testing.T, f reflect.Value, name string) {
	t.Helper()
	switch f.Kind() {
	case reflect.String:
		f.SetString("x-" + name)
	case reflect.Float64:
		f.SetFloat(1.5)
	case reflect.Int64:
		f.SetInt(7)
	case reflect.Map:
		f.Set(reflect.ValueOf(map[string]string{"K": name}))
	case reflect.Slice:
		f.Set(reflect.ValueOf([]string{name}))
	case reflect.Pointer:
		b := false
		f.Set(reflect.ValueOf(&b))
	default:
		t.Fatalf("field %s: kind %s not handled by this test", name, f.Kind())
	}
}
