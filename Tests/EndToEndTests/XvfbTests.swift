import CX11
import Foundation
import Testing

/// The X server Scripts/test starts must have what capture needs: MIT-SHM, DAMAGE, XFIXES,
/// RANDR, 24-bit TrueColor at 1920x1080.
@Suite struct XvfbTests {
    @Test func testDisplayHasTheExtensionsCaptureNeeds() throws {
        let name = try #require(ProcessInfo.processInfo.environment["DISPLAY"], "DISPLAY is not set: run the tests through Scripts/test")
        let display = try #require(XOpenDisplay(name), "cannot open display \(name)")
        defer { XCloseDisplay(display) }
        let screen = cx11_default_screen(display)
        #expect(cx11_display_width(display, screen) == 1920)
        #expect(cx11_display_height(display, screen) == 1080)
        #expect(cx11_default_depth(display, screen) == 24)
        #expect(XShmQueryExtension(display) != 0)
        var ev: Int32 = 0, er: Int32 = 0
        #expect(XDamageQueryExtension(display, &ev, &er) != 0)
        #expect(XFixesQueryExtension(display, &ev, &er) != 0)
        #expect(XRRQueryExtension(display, &ev, &er) != 0)
    }
}
