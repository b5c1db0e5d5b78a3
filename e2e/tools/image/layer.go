package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// tree is the content of one layer: entries by their path inside the image (no leading "/").
// A layer is written from it in sorted order with one owner and one time per entry, so the same
// tree gives the same bytes whatever order a directory walk returned and whatever times the files
// carried on disk.
type tree map[string]*entry

type entry struct {
	typ      byte // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode     int64
	uid, gid int
	link     string // symlink target
	src      string // a regular file's content on disk, or
	data     []byte // a regular file's content in memory
}

func (t tree) dir(name string, mode int64, uid, gid int) {
	t.parents(name)
	t[name] = &entry{typ: tar.TypeDir, mode: mode, uid: uid, gid: gid}
}

func (t tree) file(name string, mode int64, data []byte) {
	t.parents(name)
	t[name] = &entry{typ: tar.TypeReg, mode: mode, data: data}
}

func (t tree) symlink(name, target string) {
	t.parents(name)
	t[name] = &entry{typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// parents adds the missing directories above name, root-owned 0755.
func (t tree) parents(name string) {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := t[d]; !ok {
			t[d] = &entry{typ: tar.TypeDir, mode: 0o755}
		}
	}
}

// addDir adds everything under root (directories, regular files, symlinks) as root-owned
// entries with their permission bits, leaving out paths skip names. Anything else (a device, a
// socket, a hard link's second name) is an error: a Debian runtime library package has none.
func (t tree) addDir(root string, skip func(rel string) bool) error {
	seen := map[uint64]string{}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := int64(info.Mode().Perm())
		if info.Mode()&fs.ModeSetuid != 0 {
			mode |= 0o4000
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			mode |= 0o2000
		}
		switch {
		case info.IsDir():
			t.dir(rel, mode, 0, 0)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.symlink(rel, target)
		case info.Mode().IsRegular():
			if ino, nlink := inode(info); nlink > 1 {
				if first, ok := seen[ino]; ok {
					return fmt.Errorf("%s is a hard link to %s: not supported", p, first)
				}
				seen[ino] = p
			}
			t.parents(rel)
			t[rel] = &entry{typ: tar.TypeReg, mode: mode, src: p}
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, info.Mode().Type())
		}
		return nil
	})
}

// writeTarGz writes the tree as a gzip-compressed tar: entries sorted by path (a directory
// before what it holds), directories named with a trailing "/", every time epoch, numeric
// owners only, no gzip name or time.
func (t tree) writeTarGz(dst string, epoch time.Time) error {
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	sort.Strings(names)
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := bufio.NewWriterSize(f, 1<<20)
	zw, err := gzip.NewWriterLevel(buf, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, name := range names {
		e := t[name]
		hdr := &tar.Header{Typeflag: e.typ, Name: name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: epoch, Format: tar.FormatPAX}
		var content []byte
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.link
		case tar.TypeReg:
			content = e.data
			if e.src != "" {
				if content, err = os.ReadFile(e.src); err != nil {
					return err
				}
			}
			hdr.Size = int64(len(content))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := tw.Write(content); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := buf.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// resolve follows symlinks inside the tree (absolute targets are relative to the image root)
// and reports the regular file name finally names, if any.
func (t tree) resolve(name string) (string, bool) {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	for range 40 {
		next, followed := t.followOne(name)
		if next == "" {
			return "", false
		}
		if !followed {
			return name, t[name].typ == tar.TypeReg
		}
		name = next
	}
	return "", false
}

// followOne replaces the first symlink on name's path (a directory on the way, such as /lib64,
// or the name itself) by its target; "" when a component is missing.
func (t tree) followOne(name string) (string, bool) {
	parts := strings.Split(name, "/")
	cur := ""
	for i, p := range parts {
		next := path.Join(cur, p)
		e, ok := t[next]
		if !ok {
			return "", false
		}
		if e.typ == tar.TypeSymlink {
			target := e.link
			if !strings.HasPrefix(target, "/") {
				target = path.Join("/", cur, target)
			}
			return strings.TrimPrefix(path.Clean(path.Join(target, path.Join(parts[i+1:]...))), "/"), true
		}
		cur = next
	}
	return name, false
}

// inode is a file's inode number and link count.
func inode(info fs.FileInfo) (uint64, uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino, uint64(st.Nlink)
	}
	return 0, 1
}
