package harness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one control-plane binary started by the harness. Its stdout and stderr go to
// <dir>/<name>.log; it is killed if the test process dies (Pdeathsig), so no run leaks servers.
type Process struct {
	Name    string
	LogPath string
	dir     string
	bin     string
	args    []string
	env     []string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	// started and ended (set before done closes) time the run.
	started, ended time.Time
}

// StartProcess runs bin with args, logging to dir/name.log (appended, so a restarted process keeps
// its earlier log).
func StartProcess(dir, name, bin string, args ...string) (*Process, error) {
	return StartProcessEnv(dir, name, bin, nil, args...)
}

// StartProcessEnv is StartProcess with env ("KEY=value") added to the test's environment.
func StartProcessEnv(dir, name, bin string, env []string, args ...string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, dir: dir, bin: bin, args: args, env: env, cmd: cmd,
		done: make(chan struct{}), started: time.Now()}
	go func() {
		p.err = cmd.Wait()
		p.ended = time.Now()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// ExitError says that the process exited, and how: its exit status, its log's path and the log's
// last lines (a test's report may be all a CI run keeps of a failure). nil while it runs.
func (p *Process) ExitError(while string) error {
	exited, err := p.Exited()
	if !exited {
		return nil
	}
	return fmt.Errorf("%s exited%s (%v); log: %s; it ends:\n%s", p.Name, while, err, p.LogPath, lastLines(p.LogPath, 5))
}

// lastLines is the last n lines of the file at path, indented, from its last 16 KiB.
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	defer f.Close()
	buf := make([]byte, 16<<10)
	if st, err := f.Stat(); err == nil && st.Size() > int64(len(buf)) {
		if _, err := f.Seek(st.Size()-int64(len(buf)), io.SeekStart); err != nil {
			return "    (" + err.Error() + ")"
		}
	}
	k, _ := io.ReadFull(f, buf)
	lines := strings.Split(strings.TrimRight(string(buf[:k]), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "    " + strings.Join(lines, "\n    ")
}

// Ran is how long the process ran, once it has exited (0 before).
func (p *Process) Ran() time.Duration {
	if exited, _ := p.Exited(); !exited {
		return 0
	}
	return p.ended.Sub(p.started)
}

// Stop sends SIGTERM to the process group and SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill ends the process group at once (SIGKILL), as a crash or an OOM kill would.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Again starts the same binary with the same arguments and environment as a new Process (the
// log is appended to); p must have exited.
func (p *Process) Again() (*Process, error) {
	if exited, _ := p.Exited(); !exited {
		return nil, fmt.Errorf("%s is still running", p.Name)
	}
	return StartProcessEnv(p.dir, p.Name, p.bin, p.env, p.args...)
}

// Signal sends sig to the process itself (not its group).
func (p *Process) Signal(sig syscall.Signal) error {
	if exited, err := p.Exited(); exited {
		return fmt.Errorf("%s has exited (%v)", p.Name, err)
	}
	return p.cmd.Process.Signal(sig)
}
