/// The timestamps libvpx is given (90 kHz). libvpx takes its frame rate from the gaps between
/// them, and a frame's share of the bit rate from that rate. Under the send budget (`motion`
/// under congestion control, ``PacketPacer``) pictures the budget made the encoder wait through
/// would read as a lower frame rate, so bigger frames, held longer by the same budget: a loop
/// that settled at 9–15 fps at 640×360 under 10 % loss, where 30 fps fit before FEC came on.
/// There, as libwebrtc gives libvpx the input's frame rate (`timestamp_ += duration`) and not
/// the gaps its own drops make, each frame advances by one interval of the capture's frame rate
/// (measured over a second, at most the asked-for rate). Otherwise by the pictures' own times:
/// a still slide's refinement takes the bits of the time it stood still. Pure: times in,
/// timestamps out.
struct EncoderTimeline: Equatable {
    /// The last timestamp given (0 before the first frame).
    private(set) var pts: Int64 = 0
    private var lastRTP: UInt32?
    /// The capture's rate: pictures counted since `windowStart`.
    private var windowStart: UInt64?
    private var windowPictures = 0
    private var lastPictures = 0
    /// The capture's measured frame rate, nil until a second has been measured.
    private(set) var captureFps: Double?

    static let windowNanos: UInt64 = 1_000_000_000

    /// `pictures`: how many pictures the capture has made in all, read at `now`.
    mutating func captured(_ pictures: Int, at now: UInt64) {
        guard let start = windowStart else {
            windowStart = now
            lastPictures = pictures
            windowPictures = 0
            return
        }
        windowPictures += pictures - lastPictures
        lastPictures = pictures
        let elapsed = now &- start
        guard elapsed >= Self.windowNanos else { return }
        captureFps = Double(windowPictures) * 1e9 / Double(elapsed)
        windowStart = now
        windowPictures = 0
    }

    /// The timestamp for a frame whose RTP timestamp is `rtp`. `budgeted`: the send budget may
    /// hold the encoder; `fps`: the rate asked for.
    mutating func next(rtp: UInt32, budgeted: Bool, fps: Int) -> Int64 {
        defer { lastRTP = rtp }
        guard let last = lastRTP else { return pts }
        let gap = Int64(Int32(bitPattern: rtp &- last))
        let step: Int64
        if budgeted {
            let rate = min(Double(max(fps, 1)), max(captureFps ?? Double(fps), 1))
            step = Int64((90_000 / rate).rounded())
        } else {
            step = gap
        }
        pts += max(step, 1)
        return pts
    }
}
