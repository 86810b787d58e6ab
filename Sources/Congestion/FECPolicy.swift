/// When to send forward error correction, and how much. NACK repairs a loss one round trip
/// later; FEC repairs it at once, for a share of the rate. `auto` sends FEC when the loss
/// measured (transport-wide feedback: every packet sent, resends too) times the round trip says
/// repairs by NACK would stall the picture too often, as libwebrtc's hybrid NACK/FEC mode does:
/// from 3 % loss at a 100 ms round trip, 1.5 % at 200 ms, 5 % at 60 ms (loss × RTT ≥ 3 ms, and
/// at least 1 % loss); it stops when that stays under half for 5 s. (At 5 % loss and 50 ms
/// NACK alone froze the picture 0–0.15 s in 30 s, and FEC's share of the rate only made it
/// smaller; at 100 ms NACK alone froze it 1.1–1.8 s, FEC 0.2–0.4 s.) The protection (FEC packets per media packet)
/// follows the loss: 2.5 × loss + 5 %, from 10 % to 50 % (5 % loss: 17.5 %). Loss while a
/// queue stands or builds is congestion, not the link's: FEC would only add to it, so such
/// feedback is left out (the rate controller answers it).
public struct FECPolicy: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable {
        /// Switched on and off by loss and round trip.
        case auto
        /// Always on, sized to the loss.
        case on
        /// Never.
        case off
    }

    public var mode: Mode
    /// FEC packets per media packet now (0: none).
    public private(set) var protection = 0.0
    /// The loss the size follows: an average over about 2 s of feedback.
    public private(set) var averageLoss = 0.0
    /// When the exposure fell under the off threshold (ns), while on.
    private var lowSince: UInt64?

    /// On at loss × RTT (ms) of this or more, with at least ``minimumLoss``.
    public static let onExposure = 3.0
    public static let minimumLoss = 0.01
    /// Off after ``offDelay`` under half of it.
    public static let offDelay: UInt64 = 5_000_000_000

    public init(mode: Mode) {
        self.mode = mode
        if mode == .on { protection = Self.size(loss: 0) }
    }

    /// The protection for a loss fraction.
    public static func size(loss: Double) -> Double { min(0.5, max(0.1, 2.5 * loss + 0.05)) }

    /// Takes one feedback's loss fraction (of the last second of feedback) and round trip;
    /// `congested`: a queue stands or builds on the path (the loss is left out).
    /// - Returns: whether FEC went on or off.
    @discardableResult
    public mutating func update(loss: Double, rttNanos: UInt64, congested: Bool = false, now: UInt64) -> Bool {
        if congested && mode == .auto { return false }
        let loss = min(1, max(0, loss.isFinite ? loss : 0))
        averageLoss += (loss - averageLoss) * 0.1  // feedback every 100 ms or so: about 2 s
        let wasOn = protection > 0
        switch mode {
        case .off:
            protection = 0
        case .on:
            protection = Self.size(loss: averageLoss)
        case .auto:
            let exposure = averageLoss * Double(rttNanos) / 1e6
            if exposure >= Self.onExposure && averageLoss >= Self.minimumLoss {
                lowSince = nil
                protection = Self.size(loss: averageLoss)
            } else if wasOn {
                if exposure < Self.onExposure / 2 || averageLoss < Self.minimumLoss / 2 {
                    if let since = lowSince, now &- since >= Self.offDelay {
                        protection = 0
                        lowSince = nil
                    } else if lowSince == nil {
                        lowSince = now
                    }
                } else {
                    lowSince = nil
                }
                if protection > 0 { protection = Self.size(loss: averageLoss) }
            }
        }
        return wasOn != (protection > 0)
    }
}
