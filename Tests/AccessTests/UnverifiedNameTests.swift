import Access
import Testing

/// The name a token gives its bearer, read (unverified) only to tell a presenter the name the
/// relay will show: from a token Python's hmac signed (not ours), none, or garbage.
@Suite struct UnverifiedNameTests {
    @Test func theNameClaimIsReadAndNothingElseIsTaken() {
        let ada = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzY3JlZW5zaGFyZSIsInN1YiI6InZpZXdlci0xIiwibmFtZSI6IkFkYSIsIm5iZiI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwLCJ2aWRlbyI6eyJyb29tIjoiY2xhc3MiLCJyb29tSm9pbiI6dHJ1ZSwiY2FuUHVibGlzaCI6ZmFsc2UsImNhblN1YnNjcmliZSI6dHJ1ZX19.980Bu27fbF9C6Jjtq_R5ZjRmGQ8HOs8eP4zur3sPsiM"
        let teacher = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0ZWFjaGVyIiwiZXhwIjo0MTAyNDQ0ODAwLCJ2aWRlbyI6eyJyb29tIjoiY2xhc3MiLCJyb29tSm9pbiI6dHJ1ZSwiY2FuUHVibGlzaCI6dHJ1ZX19.RF_3VJQQTIIVe7GsXzXm3jzRFCmneJc__Rb9bcUz9vw"
        #expect(RoomToken.unverifiedName(of: ada) == "Ada")
        #expect(RoomToken.unverifiedName(of: teacher) == nil)
        for garbage in ["", "abc", "a.b.c", "a.!!!.c", "a.eyJuYW1lIjo0Mn0.c"] {
            #expect(RoomToken.unverifiedName(of: garbage) == nil, "\(garbage)")
        }
    }
}
