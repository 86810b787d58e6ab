// ScreenCapture
