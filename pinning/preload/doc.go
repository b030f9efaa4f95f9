// Package preload keeps the pins of the preload directory (--preload-images-dir).
// A watcher (watch.go) follows the directory through inotify (fsnotify), debounced,
// with full scans besides, and polls where inotify cannot watch it. It feeds a state
// machine per file (dir.go): a file is processed once its size, modification time
// and inode have held for the settle time; what each file pinned, with each
// archive's sha256, is recorded in the state directory; the pins are published to
// the Pinner (Pins) at every change; and while files that were in the directory at
// start, with nothing saved for them, are not read yet, the Pinner refuses. One
// background loader (load.go) loads archives through the engine's Loader, skipping
// one whose digest is the recorded one and whose images the engine still has
// (ImageChecker); failed loads are retried with backoff. The references of .txt
// lists are pulled with backoff (list.go, ImagePuller); manifest.go reads what an
// archive names before it loads; wait.go holds ImageStatus's bounded wait (WaitFor)
// and ReloadFor, which puts back a preloaded image that was deleted.
package preload
