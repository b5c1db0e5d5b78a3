package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Lock is kube-scheduler-config/image.lock: the one owner of the published image's digests.
// The chart's values.yaml copies Repository and Index (image.repository, image.digest); a test
// in host-shim/go checks the copy, and `make image` checks a fresh build against the lock.
type Lock struct {
	Comment    string            `json:"comment"`
	Repository string            `json:"repository"`
	Version    string            `json:"version"`
	Revision   string            `json:"revision"`
	Index      string            `json:"index"`
	Manifests  map[string]string `json:"manifests"`
}

const lockComment = "Written by `make image-pin` (cdplace-image pin -update) from a build of revision; " +
	"`make image` fails when a fresh build differs. values.yaml image.digest copies index."

func runPin(args []string) error {
	fl := flag.NewFlagSet("pin", flag.ExitOnError)
	digestsPath := fl.String("digests", "target/image/digests.json", "the build's digests.json")
	lockPath := fl.String("lock", "kube-scheduler-config/image.lock", "the lock file")
	valuesPath := fl.String("values", "kube-scheduler-config/chart/cdplace-scheduler/values.yaml", "the chart's values.yaml")
	repository := fl.String("repository", "ghcr.io/cdplace/kube-scheduler", "where the image is published")
	update := fl.Bool("update", false, "write the build's digests into the lock and values.yaml instead of comparing")
	_ = fl.Parse(args)

	raw, err := os.ReadFile(*digestsPath)
	if err != nil {
		return err
	}
	var d Digests
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%s: %w", *digestsPath, err)
	}
	built := Lock{Comment: lockComment, Repository: *repository, Version: d.Version, Revision: d.Revision,
		Index: d.Index, Manifests: map[string]string{}}
	for _, p := range d.Platforms {
		built.Manifests[p.Platform] = p.Manifest
	}
	if *update {
		if strings.HasSuffix(d.Revision, "-dirty") {
			return fmt.Errorf("the build is of %s: commit the image's inputs first, then pin", d.Revision)
		}
		out, err := json.MarshalIndent(built, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*lockPath, append(out, '\n'), 0o644); err != nil {
			return err
		}
		values, err := os.ReadFile(*valuesPath)
		if err != nil {
			return err
		}
		values, err = setImagePin(values, built.Repository, built.Index)
		if err != nil {
			return fmt.Errorf("%s: %w", *valuesPath, err)
		}
		if err := os.WriteFile(*valuesPath, values, 0o644); err != nil {
			return err
		}
		fmt.Printf("pinned %s@%s in %s and %s\n", built.Repository, built.Index, *lockPath, *valuesPath)
		return nil
	}

	raw, err = os.ReadFile(*lockPath)
	if err != nil {
		return err
	}
	var locked Lock
	if err := json.Unmarshal(raw, &locked); err != nil {
		return fmt.Errorf("%s: %w", *lockPath, err)
	}
	if diff := compareLocks(locked, built); diff != "" {
		return fmt.Errorf("the build differs from %s:\n%s\nIf the image's inputs changed on purpose, "+
			"commit them and run `make image-pin` (or make image IMAGE_UPDATE_PIN=1)", *lockPath, diff)
	}
	fmt.Printf("the build matches %s: %s@%s\n", *lockPath, locked.Repository, locked.Index)
	return nil
}

// compareLocks lists what differs between the pinned and the built image, "" when nothing does.
func compareLocks(locked, built Lock) string {
	var diffs []string
	add := func(what, want, got string) {
		if want != got {
			diffs = append(diffs, fmt.Sprintf("  %s: locked %q, built %q", what, want, got))
		}
	}
	add("repository", locked.Repository, built.Repository)
	add("version", locked.Version, built.Version)
	add("revision", locked.Revision, built.Revision)
	add("index", locked.Index, built.Index)
	for p, m := range built.Manifests {
		add(p, locked.Manifests[p], m)
	}
	for p, m := range locked.Manifests {
		if _, ok := built.Manifests[p]; !ok {
			add(p, m, "")
		}
	}
	return strings.Join(diffs, "\n")
}

var (
	topLevelKey = regexp.MustCompile(`^[A-Za-z]`)
	imageKey    = regexp.MustCompile(`^  (repository|digest): .*$`)
	digestRE    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// setImagePin sets image.repository and image.digest in values.yaml, changing those two lines
// and nothing else (the file's comments and the rest of the chart's values are not ours).
func setImagePin(values []byte, repository, digest string) ([]byte, error) {
	if !digestRE.MatchString(digest) {
		return nil, fmt.Errorf("digest %q is not sha256:<64 hex>", digest)
	}
	lines := strings.Split(string(values), "\n")
	inImage, set := false, map[string]bool{}
	for i, line := range lines {
		if topLevelKey.MatchString(line) {
			inImage = line == "image:"
			continue
		}
		if m := imageKey.FindStringSubmatch(line); inImage && m != nil {
			lines[i] = "  repository: " + repository
			if m[1] == "digest" {
				lines[i] = fmt.Sprintf("  digest: %q", digest)
			}
			set[m[1]] = true
		}
	}
	if !set["repository"] || !set["digest"] {
		return nil, fmt.Errorf("no image.repository and image.digest lines to set (found %v)", set)
	}
	return []byte(strings.Join(lines, "\n")), nil
}
