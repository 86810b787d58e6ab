/// Takes a captured picture in bands: what changed since the previous picture comes first, then
/// the pixels of the areas the sink asked for, band by band (MIT-SHM's segment holds one band,
/// not the picture). Called on the capture thread, during the capturer's `capture(force:into:)`.
public protocol CaptureSink: AnyObject {
    /// A picture of `size` is about to be grabbed. `changed`: what changed since the previous
    /// picture, in its pixels (nil: unknown, anything may have). Append to `areas` (empty on the
    /// call) the parts to deliver; appending nothing grabs nothing. Borrowed for the call.
    func begin(size: PixelSize, changed: UnsafeBufferPointer<PixelRect>?, areas: inout [PixelRect])
    /// The pixels of a band of an asked area, its top-left at (x, y) in the picture. Valid only
    /// during the call.
    func write(_ band: BGRAImageView, x: Int, y: Int)
    /// Every asked area was delivered.
    func end()
    /// The grab failed part way (an X error): what was written since `begin` is no picture.
    func cancel()
}
