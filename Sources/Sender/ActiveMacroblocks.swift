/// Which macroblocks the encoder works on (libvpx's active map): those the screen changed in
/// during the last ``refinementFrames`` new pictures; the rest are taken from the last frame
/// as they are, with no search and no bits. A clip playing in a still slide then costs what
/// the clip covers, not the whole screen (XDamage says what changed, ``VideoFrame/changes``).
///
/// A macroblock stays active a while after its last change: its first encodings are coarse
/// (rate control spends little on a frame that changed a lot), and the frames after refine it,
/// as they refine a still screen; and with temporal layers a change in an upper-layer frame must
/// still be encoded in the next base-layer frame, which does not reference it. After a keyframe
/// (coarse, and every macroblock in it new) everything refines again. And every new picture
/// also encodes one macroblock row in ``refreshPeriod`` (a band that moves down the picture), so
/// the still rest keeps sharpening while the clip plays, at a fifteenth of the cost of encoding
/// it all: without it, a still slide beside a clip stayed at the quality of its first second
/// (bench `clip`: 44.3 dB against 47.7 with everything encoded).
///
/// Pure and preallocated: the arrays change only with the picture's size.
struct ActiveMacroblocks {
    /// New pictures a macroblock stays active after it changed (1 s at 30 fps).
    static let refinementFrames: UInt32 = 30
    /// Each new picture also encodes the macroblock rows whose number is the picture's modulo this.
    static let refreshPeriod = 15
    private(set) var columns = 0
    private(set) var rows = 0
    /// Per macroblock, the number of the new picture it last changed in.
    private var lastChange: [UInt32] = []
    /// The map for the encoder (1: encode), made by ``next(changes:columns:rows:)``.
    private(set) var map: [UInt8] = []
    private(set) var picture: UInt32 = 0
    /// Active macroblocks in the last map.
    private(set) var activeCount = 0

    /// Every macroblock changed now (a keyframe, a new encoder, a new size).
    mutating func touchAll(columns: Int, rows: Int) {
        if columns != self.columns || rows != self.rows || map.isEmpty {
            self.columns = columns
            self.rows = rows
            lastChange = [UInt32](repeating: picture, count: columns * rows)
            map = [UInt8](repeating: 1, count: columns * rows)
        } else {
            for i in lastChange.indices { lastChange[i] = picture }
        }
    }

    /// The next new picture, whose changed macroblocks are `changes` (1: changed; nil: any may
    /// have). Makes ``map``; returns whether any macroblock is left out (false: encode them all,
    /// no map needed).
    mutating func next(changes: UnsafePointer<UInt8>?, columns: Int, rows: Int) -> Bool {
        picture &+= 1
        if columns != self.columns || rows != self.rows || map.isEmpty { touchAll(columns: columns, rows: rows) }
        let count = columns * rows
        if let changes {
            for i in 0..<count where changes[i] != 0 { lastChange[i] = picture }
        } else {
            for i in 0..<count { lastChange[i] = picture }
        }
        var active = 0
        let band = Int(picture % UInt32(Self.refreshPeriod))
        for row in 0..<rows {
            let refresh = row % Self.refreshPeriod == band
            for i in (row * columns)..<((row + 1) * columns) {
                let on = refresh || picture &- lastChange[i] < Self.refinementFrames
                map[i] = on ? 1 : 0
                if on { active += 1 }
            }
        }
        activeCount = active
        return active < columns * rows
    }

    /// The map's storage, for libvpx (which copies it).
    mutating func withMap<R>(_ body: (UnsafeMutablePointer<UInt8>) -> R) -> R {
        map.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
    }
}
