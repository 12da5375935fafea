package fileop

import (
	"reflect"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// A FileOp is a file operation as plain data (issue 21): nothing in it
// points into sm's state or calls back into it (no pointer, interface,
// func, chan or map), so a host may copy, log or compare it; the work on
// the state is a Compute, on a lane of its own.
func TestFileOpIsPlainData(t *testing.T) {
	var check func(path string, ty reflect.Type)
	check = func(path string, ty reflect.Type) {
		switch ty.Kind() {
		case reflect.Pointer, reflect.Interface, reflect.Func, reflect.Chan, reflect.Map, reflect.UnsafePointer:
			t.Errorf("sm.FileOp%s is a %s (%s): not plain data", path, ty.Kind(), ty)
		case reflect.Slice, reflect.Array:
			check(path+"[]", ty.Elem())
		case reflect.Struct:
			for i := range ty.NumField() {
				f := ty.Field(i)
				check(path+"."+f.Name, f.Type)
			}
		}
	}
	check("", reflect.TypeOf(sm.FileOp{}))
}
