// swift-tools-version:6.0
import PackageDescription

/// GLib's header directories (Debian's, amd64: the package is built for it), for CGio.
let glibIncludes = ["/usr/include/glib-2.0", "/usr/lib/x86_64-linux-gnu/glib-2.0/include", "/usr/include/gio-unix-2.0"].flatMap { ["-Xcc", "-I" + $0] }

let package = Package(
    name: "screenshare",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "screenshare", targets: ["screenshare"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // 3.x or 4.x: jwt-kit 5 needs 4.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        // HTTPS for the relay's page, WHEP and room API (`--tls-cert`), and `watch https://…`.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
    ],
    targets: [
        // C libraries behind thin system-library targets (module.modulemap + shim.h).
        .systemLibrary(name: "CX11", pkgConfig: "x11 xext xdamage xfixes xrandr xcomposite",
                       providers: [.apt(["libx11-dev", "libxext-dev", "libxdamage-dev", "libxfixes-dev", "libxrandr-dev", "libxcomposite-dev"])]),
        .systemLibrary(name: "CYUV", providers: [.apt(["libyuv-dev"])]),
        .systemLibrary(name: "CVPX", pkgConfig: "vpx", providers: [.apt(["libvpx-dev"])]),
        // libpulse.pc's Cflags (-D_REENTRANT -pthread) are flags SwiftPM refuses with a warning;
        // its headers are in /usr/include and the module map links "pulse", so no pkg-config.
        .systemLibrary(name: "CPulse", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CZlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        // GLib's GIO: GDBus for the xdg-desktop-portal. Its pkg-config Cflags carry -pthread,
        // which SwiftPM refuses with a warning: the include paths are given to the one module
        // that imports it (Portal, `internal import`, so no other module needs them).
        .systemLibrary(name: "CGio", providers: [.apt(["libglib2.0-dev"])]),

        // libavformat's headers (libavformat-dev), and a loader: the libraries are opened with
        // dlopen when a recording starts, never linked (see Sources/CAV/include/cav.h).
        .target(name: "CAV", linkerSettings: [.linkedLibrary("dl")]),
        // OpenSSL's headers (libssl-dev), and functions of the same names that open libssl and
        // libcrypto with dlopen the first time DTLS or SRTP is used: a sender or viewer of a plain
        // RTP stream never maps them (include/shim.h). Also SRTP's transforms over libcrypto
        // (srtp_evp.c).
        .target(name: "COpenSSL", dependencies: ["CLoadOnUse"]),
        // libsrtp2 (libsrtp2-dev), the same way: only the tests use it, as the reference our SRTP
        // is checked against both ways.
        .target(name: "CSRTP", dependencies: ["CLoadOnUse"]),
        // The loader both use (include/load_on_use.h): dlopen once, every function found by name.
        .target(name: "CLoadOnUse", linkerSettings: [.linkedLibrary("dl")]),
        // sendmmsg/recvmmsg (Glibc hides them behind _GNU_SOURCE): the relay's batched socket I/O.
        .target(name: "CSocketBatch"),
        // libvpx's calls to memset skip the pages never touched (its 24-bytes-a-pixel token buffer).
        .target(name: "CZeroFill"),
        // BGRX → I420 to within rounding of BT.601 (libyuv's is 8-bit): `detail`'s conversion.
        .target(name: "CColor"),
        // The version `screenshare --version` prints, from `git describe` (Scripts/lib/common.sh).
        .target(name: "CBuildInfo"),

        // Pure Swift modules.
        // What any part of a program needs from the system, without Foundation: threads, a
        // condition lock on the monotonic clock, private files, percent-encoding, printf's
        // numbers, and the errors a user's values and files and errno give.
        .target(name: "Basics"),
        // Media's common parts: frames and their pool, the capture sink and what changed, the
        // latest-frame mailbox, the injectable clocks, bit rates and the rate bucket.
        .target(name: "MediaCore", dependencies: ["Basics"]),
        .target(name: "RTP"),
        .target(name: "RTCP", dependencies: ["RTP"]),
        .target(name: "RTPSession", dependencies: ["RTP", "RTCP"]),
        // WebRTC's pieces for browsers, sans-I/O: STUN and the ICE-lite agent, the WHEP offer and
        // answer, DTLS 1.2 with DTLS-SRTP (OpenSSL), SRTP (libsrtp2).
        .target(name: "WebRTC", dependencies: ["CZlib", "COpenSSL", "SRTP", "MediaCore", "Basics", .product(name: "Crypto", package: "swift-crypto")]),
        // SRTP and SRTCP (RFC 3711, RFC 7714) over OpenSSL's libcrypto: keyed by DTLS-SRTP or SDES (`--srtp`).
        .target(name: "SRTP", dependencies: ["COpenSSL"]),
        // The browser link as a QR code (libqrencode), for a terminal or as an image.
        .target(name: "QRCode", dependencies: ["CQREncode"]),
        // Who may enter a room: room tokens (JWT, HS256, LiveKit's claims) made and checked with
        // jwt-kit, the secret file.
        .target(name: "RoomLink", dependencies: ["Room", "WebRTC", "SRTP"]),
        // Send-side bandwidth estimation (GoogCC's shape), pure: feedback and time in, a rate out.
        .target(name: "Congestion", dependencies: ["RTCP"]),
        .target(name: "Access", dependencies: ["Room", "MediaCore", "Basics", .product(name: "JWTKit", package: "jwt-kit")]),
        // Typed events: JSON lines for machines, one line of text for people.
        .target(name: "Events", dependencies: ["MediaCore", "Basics"]),
        // A peer's IPv4 address and port: the name the relay and the sockets share, below both.
        .target(name: "NetworkAddress"),
        // UDP sockets, batched datagram I/O, endpoints, the machine's addresses; one errno → error path.
        .target(name: "Transport", dependencies: ["CSocketBatch", "MediaCore", "Basics", "NetworkAddress"]),
        // The room protocol, the relay's forwarding logic and the client's state machine: pure,
        // no sockets and no event rendering (it produces plain values).
        .target(name: "Room", dependencies: ["MediaCore", "Basics", "RTP", "RTCP", "RTPSession", "NetworkAddress", "Congestion", .product(name: "Crypto", package: "swift-crypto")]),
        // The room's and the relay's plain values rendered as events (JSON fields, one line of text).
        .target(name: "RoomEvents", dependencies: ["Room", "Events", "NetworkAddress"]),

        // Modules wrapping C libraries.
        .target(name: "ScreenCapture", dependencies: [
            "CX11", "MediaCore", "Basics", .product(name: "Logging", package: "swift-log"),
        ]),
        // A PipeWire video stream read for capture (libpipewire-0.3-dev): its format builders
        // are C macros and varargs, so the negotiation is in C behind an opaque API.
        .target(name: "CPipeWire", cSettings: [.unsafeFlags(["-I/usr/include/pipewire-0.3", "-I/usr/include/spa-0.2", "-D_REENTRANT"])],
                linkerSettings: [.linkedLibrary("pipewire-0.3")]),
        // The xdg-desktop-portal's ScreenCast (a Wayland desktop's screen, asked of the user once).
        .target(name: "Portal", dependencies: ["CGio", "CPipeWire", "Basics", "MediaCore", "ScreenCapture"], swiftSettings: [.unsafeFlags(glibIncludes)]),
        .target(name: "VideoProcessing", dependencies: ["CYUV", "CColor", "MediaCore", "Basics"]),
        .target(name: "VP8Codec", dependencies: ["CAV", "CVPX", "CZeroFill", "MediaCore", "Basics"]),
        .target(name: "Recording", dependencies: ["CAV", "MediaCore", "Basics", .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "VideoOutput", dependencies: ["CX11", "CYUV", "MediaCore", "Basics"]),
        .target(name: "OpusCodec", dependencies: ["COpus"]),
        .target(name: "AudioIO", dependencies: ["CPulse", "MediaCore", "Basics", .product(name: "Logging", package: "swift-log")]),

        // The local control socket of a running `start` (`screenshare ctl`): protocol, client, server.
        .target(name: "Control", dependencies: ["Events", "MediaCore", "Basics", "Transport"]),
        // The room relay on a UDP socket: `serve`, and the one `start --room` embeds.
        .target(name: "Relay", dependencies: [
            "Room", "RoomEvents", "NetworkAddress", "RTP", "Transport", "Events", "MediaCore", "Basics", .product(name: "Logging", package: "swift-log"), "WebRTC", "SRTP", "Congestion",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ]),
        // The room `start --room` hosts in its own process: the relay, tokens, invitation links.
        .target(name: "RoomHost", dependencies: [
            "Relay", "Access", "Room", "Control", "Events", "Congestion", "Transport", "WebRTC", "MediaCore", "Basics", .product(name: "Logging", package: "swift-log"),
        ]),
        // The presenter: capture → convert → encode → packetize → send, audio, RTCP feedback.
        .target(name: "Sender", dependencies: [
            "MediaCore", "Basics", "ScreenCapture", "Portal", "VideoProcessing", "VP8Codec", "RTP", "RTCP", "RTPSession", "Room", "RoomEvents", "Recording",
            "AudioIO", "OpusCodec", "Transport", "Events", "Control", "SRTP", "RoomLink", "Congestion",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The viewer: receive → repair → reassemble → decode → show, play, record.
        .target(name: "Receiver", dependencies: [
            "MediaCore", "Basics", "VP8Codec", "RTP", "RTCP", "RTPSession", "Room", "RoomEvents", "Recording", "VideoOutput",
            "AudioIO", "OpusCodec", "Transport", "Events", "SRTP", "RoomLink",
            .product(name: "Logging", package: "swift-log"),
        ]),

        // The CLI.
        // Every parser of network input, one entry point each, for libFuzzer (`Scripts/fuzz`)
        // and for replaying the committed corpus in the tests.
        .target(name: "FuzzTargets", dependencies: ["RTP", "RTCP", "RTPSession", "Room", "NetworkAddress", "Transport", "WebRTC", "Relay", "Access", "SRTP",
                                                  "Congestion", "MediaCore", "VP8Codec"]),
        // libFuzzer's driver when built with -sanitize=fuzzer -DFUZZING (Scripts/fuzz); otherwise
        // `screenshare-fuzz TARGET FILE...` runs files once (a crash found, reproduced) and
        // `--seed DIR` writes the seed corpus.
        .executableTarget(name: "screenshare-fuzz", dependencies: ["FuzzTargets"]),
        // The portal tests' PipeWire video source that sends damage and cursor metadata.
        .executableTarget(name: "ss-test-pw-producer", path: "Tests/PipeWireProducer",
                          cSettings: [.unsafeFlags(["-I/usr/include/pipewire-0.3", "-I/usr/include/spa-0.2", "-D_REENTRANT"])],
                          linkerSettings: [.linkedLibrary("pipewire-0.3")]),
        .executableTarget(name: "screenshare", dependencies: [
            "CBuildInfo", "Sender", "Receiver", "Relay", "Control", "Events", "Transport", "QRCode", "Access", "WebRTC",
            "ScreenCapture", "VideoProcessing", "VP8Codec", "MediaCore", "Basics", "RTP", "AudioIO", "Room", "RoomEvents", "RoomHost", "Congestion", "Portal",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        .testTarget(name: "MediaCoreTests", dependencies: ["MediaCore", "Basics"]),
        .testTarget(name: "RTPTests", dependencies: ["TestSupport", "RTP"]),
        .testTarget(name: "RTCPTests", dependencies: ["TestSupport", "RTCP", "RTP"]),
        .testTarget(name: "RTPSessionTests", dependencies: ["TestSupport", "RTPSession", "RTCP", "RTP"]),
        .testTarget(name: "RoomTests", dependencies: ["TestSupport", "Room", "RoomEvents", "Events", "NetworkAddress", "RTP", "RTCP", "RTPSession"]),
        .testTarget(name: "AccessTests", dependencies: ["Access", "Room", "NetworkAddress", .product(name: "JWTKit", package: "jwt-kit")]),
        .testTarget(name: "PortalTests", dependencies: ["Portal", "X11TestSupport"], exclude: ["screencast-backend.py"]),
        .testTarget(name: "VideoProcessingTests", dependencies: ["TestSupport", "VideoProcessing", "MediaCore", "Basics"]),
        .testTarget(name: "VP8CodecTests", dependencies: ["VP8Codec", "CZeroFill", "VideoProcessing", "MediaCore", "Basics"]),
        // Shared by the pure tests: a seeded random number generator.
        .target(name: "TestSupport", dependencies: ["MediaCore", "Basics"], path: "Tests/TestSupport"),
        // A room peer that speaks the relay's encrypted hop by hand (DTLS, SRTP), for tests.
        .target(name: "HopTestSupport", dependencies: ["Room", "SRTP", "Transport", "WebRTC"], path: "Tests/HopTestSupport"),
        // Shared by the capture and end-to-end tests: real X windows to capture, and the audio/video
        // sync probe (a window that flashes with a beep; a measurer of what is seen and heard).
        .target(name: "X11TestSupport", dependencies: ["CX11", "CPulse"], path: "Tests/X11TestSupport"),
        .testTarget(name: "ScreenCaptureTests", dependencies: ["TestSupport", "ScreenCapture", "MediaCore", "Basics", "VideoProcessing", "CX11", "X11TestSupport"]),
        .testTarget(name: "VideoOutputTests", dependencies: ["VideoOutput", "MediaCore", "Basics", "CX11", "X11TestSupport"]),
        .testTarget(name: "RecordingTests", dependencies: ["Recording", "VP8Codec", "MediaCore", "Basics"]),
        .testTarget(name: "AudioIOTests", dependencies: ["AudioIO"]),
        .testTarget(name: "OpusCodecTests", dependencies: ["OpusCodec"]),
        .testTarget(name: "ControlProtocolTests", dependencies: ["Control", "Events", "TestSupport"]),
        .testTarget(name: "TransportTests", dependencies: ["Transport", "MediaCore", "Basics"]),
        .testTarget(name: "SenderTests", dependencies: [
            "TestSupport", "Sender", "Control", "Events", "MediaCore", "Basics", "ScreenCapture", "VideoProcessing", "Transport", "RTCP", "RTP", "VP8Codec", "Room",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "ReceiverTests", dependencies: [
            "Receiver", "RTP", "RTCP", "RTPSession", "Room", "OpusCodec", .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "WebRTCTests", dependencies: ["WebRTC", "SRTP", "CSRTP", "COpenSSL", "TestSupport"]),
        .testTarget(name: "RoomLinkTests", dependencies: ["RoomLink", "Room", "WebRTC", "SRTP"]),
        .testTarget(name: "CongestionTests", dependencies: ["Congestion", "RTCP", "RTPSession", "TestSupport"]),
        .testTarget(name: "QRCodeTests", dependencies: ["QRCode", "X11TestSupport"]),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets"]),
        .testTarget(name: "RelayServerTests", dependencies: [
            "Relay", "Room", "NetworkAddress", "Access", "RTP", "Transport", "Events", "MediaCore", "Basics", "WebRTC", "HopTestSupport",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // What users see of every event (JSON and human text), pinned.
        .testTarget(name: "EventsTests", dependencies: [
            "Events", "Room", "RoomEvents", "NetworkAddress", "Relay", "Sender", "Receiver", "AudioIO", "Transport", "MediaCore", "Basics", "VP8Codec",
        ]),
        .testTarget(name: "EndToEndTests", dependencies: ["RTP", "Room", "RoomEvents", "CX11", "X11TestSupport", "OpusCodec", "QRCode", "HopTestSupport", "WebRTC"]),
    ],
    swiftLanguageModes: [.v6]
)
