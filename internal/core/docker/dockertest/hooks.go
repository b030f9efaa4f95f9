package dockertest

import "context"

// SetReplyHook makes method's answers pass through hook, which runs once the fake has
// served the call (read or changed its state) and released its lock, before the answer
// returns. It can hold the answer as a slow or hung engine would (wait for a test's
// signal, or for ctx to end) while the engine changes under it, and a non-nil error it
// returns fails the call. It sees the caller's ctx, so a test can hold only some calls
// (those carrying a context value, or those not). nil removes the hook. Supported for
// Ping, ListImages, InspectImage, ImageFsUsage and RemoveImage (held once the image is
// gone, as a removal whose answer is still on its way).
func (f *Fake) SetReplyHook(method string, hook func(ctx context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if hook == nil {
		delete(f.replyHooks, method)
		return
	}
	if f.replyHooks == nil {
		f.replyHooks = map[string]func(context.Context) error{}
	}
	f.replyHooks[method] = hook
}

// replied runs method's reply hook, if any, without the lock (defer it before taking
// the lock); the hook's error becomes the call's when the call had none.
func (f *Fake) replied(ctx context.Context, method string, err *error) {
	f.mu.Lock()
	hook := f.replyHooks[method]
	f.mu.Unlock()
	if hook == nil {
		return
	}
	if herr := hook(ctx); herr != nil && *err == nil {
		*err = herr
	}
}
