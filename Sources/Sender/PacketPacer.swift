import MediaCore

/// When each packet of an encoded frame may leave: the sender's pacing, pure — packet sizes,
/// rates and times in, send times out — so it is tested in simulated time
/// (`PacketPacerTests`). The send step asks ``sendTime(bytes:now:)``, waits until then, and
/// tells ``sent(bytes:at:)``.
///
/// - **Within a frame:** the first ``Rates/unpacedBytes`` leave at once, the rest at
///   ``Rates/paceBitsPerSecond`` from the frame's start, so one burst does not overflow a
///   router's queue (or the relay's): under congestion control two packets, then 2.5 × the
///   target, as libwebrtc's pacer; without it 16 kB, then 4 × the bit rate (at least 8 Mbit/s).
/// - **Across frames, when the network limits the rate** (`motion` under congestion control,
///   not a keyframe): a budget of ``Rates/budgetBitsPerSecond`` with a burst of
///   ``Rates/burstBits``. A packet waits until the budget has room for it: an encoder that
///   overshoots for a while (libvpx can, for a second at 1.5 ×) waits here rather than in the
///   path's queue. A keyframe does not wait, but its bits count: the frames after it pay.
public struct PacketPacer: Sendable, Equatable {
    public struct Rates: Sendable, Equatable {
        public var paceBitsPerSecond: Double
        public var unpacedBytes: Int
        public var budgetBitsPerSecond: Int
        public var burstBits: Double
        /// Whether this frame waits for the budget.
        public var networkLimited: Bool

        public init(paceBitsPerSecond: Double, unpacedBytes: Int, budgetBitsPerSecond: Int, burstBits: Double, networkLimited: Bool) {
            self.paceBitsPerSecond = paceBitsPerSecond
            self.unpacedBytes = unpacedBytes
            self.budgetBitsPerSecond = budgetBitsPerSecond
            self.burstBits = burstBits
            self.networkLimited = networkLimited
        }
    }

    /// What was sent and not yet drained at the budget's rate (bits), across frames.
    public private(set) var budget = RateBucket()
    private var rates = Rates(paceBitsPerSecond: 8_000_000, unpacedBytes: 16_000, budgetBitsPerSecond: 0, burstBits: 0, networkLimited: false)
    private var frameStart: UInt64 = 0
    /// Bytes of the current frame sent so far.
    public private(set) var frameBytes = 0

    public init() {}

    /// A new frame starts at `now`, paced at `rates`.
    public mutating func startFrame(at now: UInt64, rates: Rates) {
        self.rates = rates
        frameStart = now
        frameBytes = 0
    }

    /// The earliest time (≥ `now`) the frame's next packet, of `bytes`, may leave.
    public func sendTime(bytes: Int, now: UInt64) -> UInt64 {
        var due = now
        if frameBytes > rates.unpacedBytes, rates.paceBitsPerSecond > 0 {
            due = max(due, frameStart + UInt64(Double(frameBytes - rates.unpacedBytes) * 8 / rates.paceBitsPerSecond * 1e9))
        }
        if rates.networkLimited {
            var b = budget
            b.drain(at: due, bitsPerSecond: rates.budgetBitsPerSecond)
            due += b.nanosUntil(atMost: max(0, rates.burstBits - Double(bytes * 8)), bitsPerSecond: rates.budgetBitsPerSecond)
        }
        return due
    }

    /// The packet of `bytes` left at `now`.
    public mutating func sent(bytes: Int, at now: UInt64) {
        budget.drain(at: now, bitsPerSecond: rates.budgetBitsPerSecond)
        budget.add(bits: bytes * 8)
        frameBytes += bytes
    }

    /// Forgets the budget (a new encoder: nothing it sent is owed).
    public mutating func reset() { budget = RateBucket() }
}
