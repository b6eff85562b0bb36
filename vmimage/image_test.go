package vmimage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeImage writes an image directory with the given image.json and two
// small files standing for kernel and initrd.
func fakeImage(t *testing.T, dir, json string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{MetadataFile: json, "vmlinux": "ELF", "initramfs.cpio": "BASE"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const goodJSON = `{"name":"default","kernel":"vmlinux","initrd":"initramfs.cpio","kernel_version":"6.1.0-57-cloud-amd64","pvh":true,"protocol":1}`

func TestLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "default")
	fakeImage(t, dir, goodJSON)
	img, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Image{
		Name: "default", Dir: dir,
		Kernel: filepath.Join(dir, "vmlinux"), Initrd: filepath.Join(dir, "initramfs.cpio"),
		KernelVersion: "6.1.0-57-cloud-amd64", PVH: true,
	}
	if *img != want {
		t.Errorf("Load = %+v, want %+v", *img, want)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := map[string]struct {
		setup    func(t *testing.T, dir string)
		wantText []string
		notExist bool
	}{
		"no directory": {
			setup:    func(*testing.T, string) {},
			wantText: []string{"image.json", "make image"}, notExist: true,
		},
		"no image.json": {
			setup:    func(t *testing.T, dir string) { os.MkdirAll(dir, 0o755) },
			wantText: []string{"image.json is missing", "make image"}, notExist: true,
		},
		"bad JSON": {
			setup:    func(t *testing.T, dir string) { fakeImage(t, dir, "{") },
			wantText: []string{"image.json", "not valid JSON", "make image"},
		},
		"no kernel field": {
			setup:    func(t *testing.T, dir string) { fakeImage(t, dir, `{"initrd":"initramfs.cpio"}`) },
			wantText: []string{`"kernel"`, "make image"},
		},
		"kernel file missing": {
			setup: func(t *testing.T, dir string) {
				fakeImage(t, dir, goodJSON)
				os.Remove(filepath.Join(dir, "vmlinux"))
			},
			wantText: []string{"vmlinux", "make image"}, notExist: true,
		},
		"newer protocol": {
			setup: func(t *testing.T, dir string) {
				fakeImage(t, dir, strings.Replace(goodJSON, `"protocol":1`, `"protocol":9`, 1))
			},
			wantText: []string{"protocol 9", "upgrade corral"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "img")
			tc.setup(t, dir)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, s := range tc.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if errors.Is(err, fs.ErrNotExist) != tc.notExist {
				t.Errorf("errors.Is(err, fs.ErrNotExist) = %v, want %v", !tc.notExist, tc.notExist)
			}
		})
	}
}

func TestList(t *testing.T) {
	root := t.TempDir()
	fakeImage(t, filepath.Join(root, "zeta"), strings.Replace(goodJSON, `"default"`, `"zeta"`, 1))
	fakeImage(t, filepath.Join(root, "default"), goodJSON)
	fakeImage(t, filepath.Join(root, "broken"), "not json")
	os.MkdirAll(filepath.Join(root, "cache"), 0o755) // no image.json: skipped
	os.WriteFile(filepath.Join(root, "README"), nil, 0o644)

	imgs, err := List(root)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "broken", MetadataFile)) {
		t.Errorf("err = %v, want one naming the broken image.json", err)
	}
	var names []string
	for _, img := range imgs {
		names = append(names, img.Name)
	}
	if got := strings.Join(names, ","); got != "default,zeta" {
		t.Errorf("List names = %s, want default,zeta", got)
	}

	if _, err := List(filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "make image") {
		t.Errorf("List(missing) = %v, want a not-exist error saying make image", err)
	}
}

func TestWriteInitrd(t *testing.T) {
	p := Payload{Script: []byte("true\n")}
	var payload bytes.Buffer
	if err := WritePayload(&payload, p); err != nil {
		t.Fatal(err)
	}
	// The payload must start at a 4-byte boundary, the only place the
	// kernel looks for an uncompressed archive; zeros fill the gap.
	tests := map[string]struct{ base, want string }{
		"aligned base":          {base: "BASE", want: "BASE"},
		"base one byte over":    {base: "BASE1", want: "BASE1\x00\x00\x00"},
		"base three bytes over": {base: "BASE123", want: "BASE123\x00"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "default")
			fakeImage(t, dir, goodJSON)
			if err := os.WriteFile(filepath.Join(dir, "initramfs.cpio"), []byte(tc.base), 0o644); err != nil {
				t.Fatal(err)
			}
			img, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := img.WriteInitrd(&got, p); err != nil {
				t.Fatal(err)
			}
			if want := append([]byte(tc.want), payload.Bytes()...); !bytes.Equal(got.Bytes(), want) {
				t.Errorf("WriteInitrd wrote %q..., want %q then the payload", got.Bytes()[:len(tc.want)], tc.want)
			}
		})
	}
}
