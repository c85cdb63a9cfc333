import 'package:flutter/material.dart';

import 'src/widgets/search_box.dart';
import 'src/widgets/video_panel.dart';

void main() => runApp(const App());

class App extends StatelessWidget {
  const App({super.key});

  @override
  Widget build(BuildContext context) {
    return const MaterialApp(
      home: Scaffold(body: Column(children: [SearchBox(), VideoPanel()])),
    );
  }
}
