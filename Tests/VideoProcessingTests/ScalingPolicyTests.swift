import MediaCore
import Basics
import Testing
@testable import VideoProcessing
import TestSupport

private func size(_ w: Int, _ h: Int) -> PixelSize { PixelSize(width: w, height: h) }

/// One row of the scaling table: source, --max-resolution (nil: the default), expected size.
struct ScalingCase: Sendable, CustomTestStringConvertible {
    var source: PixelSize
    var max: MaxResolution?
    var expected: PixelSize
    init(_ sw: Int, _ sh: Int, _ max: MaxResolution?, _ ew: Int, _ eh: Int) {
        source = size(sw, sh)
        self.max = max
        expected = size(ew, eh)
    }
    var testDescription: String { "\(source) under \(max.map { "\($0)" } ?? "default") → \(expected)" }
}

/// DESIGN.md: keep the aspect ratio, never upscale, long side ≤ 1920 by default, even sizes.
/// Every expected size below is worked out by hand: scale = min(boxW/sw, boxH/sh, 1), each
/// side rounded down, then down to even. Profiles are (long side, short side) boxes.
@Suite struct ScalingPolicyTests {
    @Test(arguments: [
        // Default: long side ≤ 1920.
        ScalingCase(3840, 2160, nil, 1920, 1080),  // 4K
        ScalingCase(7680, 4320, nil, 1920, 1080),  // 8K
        ScalingCase(2560, 1440, nil, 1920, 1080),
        ScalingCase(4096, 2160, nil, 1920, 1012),  // 2160·1920/4096 = 1012.5
        ScalingCase(1920, 1080, nil, 1920, 1080),  // at the limit: unchanged
        ScalingCase(1920, 1200, nil, 1920, 1200),  // only the long side is bounded
        ScalingCase(1366, 768, nil, 1366, 768),
        ScalingCase(1365, 767, nil, 1364, 766),  // odd: rounded down to even, not scaled
        ScalingCase(1080, 1920, nil, 1080, 1920),  // portrait at the limit
        ScalingCase(2160, 3840, nil, 1080, 1920),  // portrait 4K: its long side is the height
        ScalingCase(1440, 2560, nil, 1080, 1920),
        ScalingCase(3440, 1440, nil, 1920, 802),  // 1440·1920/3440 = 803.7 → 803 → 802
        ScalingCase(5120, 1440, nil, 1920, 540),  // 32:9
        ScalingCase(2000, 2000, nil, 1920, 1920),  // square
        ScalingCase(640, 480, nil, 640, 480),  // smaller: own size
        ScalingCase(641, 481, nil, 640, 480),  // smaller and odd: own size rounded to even
        ScalingCase(2, 2, nil, 2, 2),
        ScalingCase(3, 3, nil, 2, 2),
        ScalingCase(1, 1, nil, 2, 2),  // the documented floor: 2x2 is the smallest encodable size

        // 720p: 1280 on the long side, 720 on the short side.
        ScalingCase(3840, 2160, .p720, 1280, 720),
        ScalingCase(1920, 1080, .p720, 1280, 720),
        ScalingCase(1280, 720, .p720, 1280, 720),
        ScalingCase(1920, 1200, .p720, 1152, 720),  // 16:10: the short side binds
        ScalingCase(1365, 767, .p720, 1280, 718),  // 767·1280/1365 = 719.3 → 719 → 718
        ScalingCase(1080, 1920, .p720, 720, 1280),  // portrait: long side (height) ≤ 1280
        ScalingCase(3440, 1440, .p720, 1280, 534),  // 1440·1280/3440 = 535.8 → 535 → 534
        ScalingCase(5120, 1440, .p720, 1280, 360),
        ScalingCase(2000, 2000, .p720, 720, 720),
        ScalingCase(640, 480, .p720, 640, 480),  // smaller than the profile: own size
        ScalingCase(639, 479, .p720, 638, 478),
        ScalingCase(3, 3, .p720, 2, 2),

        // 1080p and 1440p.
        ScalingCase(3840, 2160, .p1080, 1920, 1080),
        ScalingCase(2560, 1600, .p1080, 1728, 1080),  // 16:10
        ScalingCase(1080, 1920, .p1080, 1080, 1920),
        ScalingCase(3440, 1440, .p1080, 1920, 802),
        ScalingCase(3840, 2160, .p1440, 2560, 1440),
        ScalingCase(5120, 1440, .p1440, 2560, 720),
        ScalingCase(3440, 1440, .p1440, 2560, 1070),  // 1440·2560/3440 = 1071.6 → 1071 → 1070
        ScalingCase(1920, 1080, .p1440, 1920, 1080),  // never upscale
        ScalingCase(1440, 2560, .p1440, 1440, 2560),

        // WxH: a literal box, whatever the orientation.
        ScalingCase(3840, 2160, .custom(size(1600, 900)), 1600, 900),
        ScalingCase(1920, 1080, .custom(size(1000, 1000)), 1000, 562),  // 1080·1000/1920 = 562.5
        ScalingCase(1080, 1920, .custom(size(1600, 900)), 506, 900),  // 1080·900/1920 = 506.25
        ScalingCase(4000, 3000, .custom(size(1600, 900)), 1200, 900),  // 4:3 in 16:9: height binds
        ScalingCase(1920, 1080, .custom(size(801, 601)), 800, 450),  // 1080·801/1920 = 450.6; 801 → 800
        ScalingCase(320, 240, .custom(size(640, 480)), 320, 240),  // never upscale
    ])
    func outputSize(_ c: ScalingCase) {
        #expect(ScalingPolicy.outputSize(source: c.source, max: c.max) == c.expected)
    }

    /// The rule's invariants over many seeded random sources and limits.
    @Test func randomSizesKeepTheRule() {
        var rng = SplitMix64(seed: 1920)
        let profiles: [MaxResolution?] = [nil, .p720, .p1080, .p1440]
        for _ in 0..<20_000 {
            let sw = Int.random(in: 2...8000, using: &rng), sh = Int.random(in: 2...8000, using: &rng)
            let max: MaxResolution? = Bool.random(using: &rng)
                ? profiles.randomElement(using: &rng)!
                : .custom(size(Int.random(in: 2...4000, using: &rng), Int.random(in: 2...4000, using: &rng)))
            let out = ScalingPolicy.outputSize(source: size(sw, sh), max: max)
            let label = "\(sw)x\(sh) under \(max.map { "\($0)" } ?? "default") → \(out)"
            #expect(out.width % 2 == 0 && out.height % 2 == 0, "\(label)")
            #expect(out.width >= 2 && out.height >= 2, "\(label)")
            #expect(out.width <= sw && out.height <= sh, "never upscale: \(label)")
            let (boxW, boxH): (Int, Int)
            switch max {
            case nil: (boxW, boxH) = sw >= sh ? (1920, Int.max) : (Int.max, 1920)
            case .custom(let b)?: (boxW, boxH) = (b.width, b.height)
            case let p?: (boxW, boxH) = sw >= sh ? (p.bounds.width, p.bounds.height) : (p.bounds.height, p.bounds.width)
            }
            #expect(out.width <= Swift.max(boxW, 2) && out.height <= Swift.max(boxH, 2), "inside the box: \(label)")
            // Aspect ratio kept to within the rounding of each side (a few pixels).
            guard out.width > 2, out.height > 2 else { continue }
            #expect(abs(out.width * sh - out.height * sw) <= 3 * (sw + sh), "aspect: \(label)")
            // As large as allowed: the binding side is within rounding of its limit.
            #expect(out.width >= Swift.min(boxW, sw) - 3 || out.height >= Swift.min(boxH, sh) - 3, "fills the box: \(label)")
        }
    }
}

@Suite struct MaxResolutionTests {
    @Test(arguments: [
        ("720p", MaxResolution.p720), ("1080p", .p1080), ("1440p", .p1440), ("720P", .p720),
        ("1600x900", .custom(size(1600, 900))), ("1600X900", .custom(size(1600, 900))),
        ("2x2", .custom(size(2, 2))), ("16384x16384", .custom(size(16384, 16384))),
    ])
    func parsesGoodText(_ text: String, _ expected: MaxResolution) throws {
        #expect(try MaxResolution.parse(text) == expected)
    }

    @Test(arguments: [
        "", "720", "4k", "2160p", "p720", "1600x", "x900", "1600x900x2", "1x1", "0x0", "1x900", "-1600x900",
        "16385x900", "1600x16385", "1600*900", "1600 x 900", " 720p", "abcxdef", "1600,900",
    ])
    func rejectsBadTextNamingIt(_ text: String) {
        let error = #expect(throws: VideoProcessingError.self) { try MaxResolution.parse(text) }
        #expect(error?.description.contains("'\(text)'") == true)
    }

    @Test func boundsAndDescriptions() throws {
        #expect(MaxResolution.p720.bounds == size(1280, 720))
        #expect(MaxResolution.p1080.bounds == size(1920, 1080))
        #expect(MaxResolution.p1440.bounds == size(2560, 1440))
        #expect(MaxResolution.custom(size(800, 600)).bounds == size(800, 600))
        for m in [MaxResolution.p720, .p1080, .p1440, .custom(size(1600, 900))] {
            #expect(try MaxResolution.parse(m.description) == m)
        }
        #expect(MaxResolution.custom(size(1600, 900)).description == "1600x900")
    }
}
