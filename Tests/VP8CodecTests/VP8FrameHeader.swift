/// The start of a VP8 frame's first partition, read as RFC 6386 says (§7.3 the boolean decoder,
/// §9.2–9.6 and §19.2 the frame header), up to the quantizer indices: enough for tests to see
/// what libvpx chose for a frame.
struct VP8FrameHeader {
    var isKeyframe: Bool
    var yACQIndex: Int
    var yDCDelta = 0, y2DCDelta = 0, y2ACDelta = 0, uvDCDelta = 0, uvACDelta = 0
    /// The U/V quantizer delta, DC and AC alike (libvpx sets them together); nil if they differ.
    var uvDeltaQ: Int? { uvDCDelta == uvACDelta ? uvDCDelta : nil }

    /// Nil if `bitstream` is too short for the header it announces.
    init?(bitstream b: [UInt8]) {
        guard b.count >= 3 else { return nil }
        isKeyframe = b[0] & 1 == 0
        let start = isKeyframe ? 10 : 3  // frame tag, then a keyframe's start code and size
        let firstPartition = (Int(b[0]) | Int(b[1]) << 8 | Int(b[2]) << 16) >> 5
        guard b.count >= start + firstPartition, firstPartition >= 2 else { return nil }
        var d = BoolDecoder(Array(b[start..<(start + firstPartition)]))
        if isKeyframe { _ = d.literal(2) }  // color_space, clamping_type
        if d.flag() {  // segmentation_enabled
            let updateMap = d.flag(), updateData = d.flag()
            if updateData {
                _ = d.flag()  // segment_feature_mode
                for _ in 0..<4 where d.flag() { _ = d.literal(7); _ = d.flag() }  // quantizer
                for _ in 0..<4 where d.flag() { _ = d.literal(6); _ = d.flag() }  // loop filter
            }
            if updateMap { for _ in 0..<3 where d.flag() { _ = d.literal(8) } }  // tree probabilities
        }
        _ = d.literal(1 + 6 + 3)  // filter_type, loop_filter_level, sharpness_level
        if d.flag(), d.flag() {  // loop_filter_adj_enable, mode_ref_lf_delta_update
            for _ in 0..<8 where d.flag() { _ = d.literal(6); _ = d.flag() }  // 4 ref frame, 4 mode deltas
        }
        _ = d.literal(2)  // log2_nbr_of_dct_partitions
        yACQIndex = d.literal(7)
        func delta() -> Int {
            guard d.flag() else { return 0 }
            let magnitude = d.literal(4)
            return d.flag() ? -magnitude : magnitude
        }
        yDCDelta = delta(); y2DCDelta = delta(); y2ACDelta = delta(); uvDCDelta = delta(); uvACDelta = delta()
    }
}

/// RFC 6386 §7.3: the boolean entropy decoder, as its reference `bool_decoder` (2-byte window).
struct BoolDecoder {
    private let data: [UInt8]
    private var position = 0
    private var value: UInt32 = 0
    private var range: UInt32 = 255
    private var bitCount = 0

    init(_ data: [UInt8]) {
        self.data = data
        value = UInt32(next()) << 8 | UInt32(next())
    }

    private mutating func next() -> UInt8 {
        defer { position += 1 }
        return position < data.count ? data[position] : 0
    }

    mutating func bool(_ probability: UInt32) -> Bool {
        let split = 1 + (((range - 1) * probability) >> 8)
        let bigSplit = split << 8
        let bit: Bool
        if value >= bigSplit {
            bit = true
            range -= split
            value -= bigSplit
        } else {
            bit = false
            range = split
        }
        while range < 128 {
            value <<= 1
            range <<= 1
            bitCount += 1
            if bitCount == 8 {
                bitCount = 0
                value |= UInt32(next())
            }
        }
        return bit
    }

    mutating func flag() -> Bool { bool(128) }

    /// An n-bit unsigned literal, most significant bit first, each at probability 128.
    mutating func literal(_ bits: Int) -> Int {
        var v = 0
        for _ in 0..<bits { v = v << 1 | (flag() ? 1 : 0) }
        return v
    }
}
